/*
 * banned.h — functions that are too easy to misuse, made compile errors.
 * Included last by common.h, so every file of ours gets it. Use cm_buf_printf,
 * snprintf, strtol-family parsers and explicit lengths instead.
 */
#ifndef CM_BANNED_H
#define CM_BANNED_H

#define BANNED(func) sorry_##func##_is_banned_in_clawmem

#undef strcpy
#define strcpy(x, y) BANNED(strcpy)
#undef strcat
#define strcat(x, y) BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) BANNED(strncpy)
#undef sprintf
#define sprintf(...) BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) BANNED(vsprintf)
#undef strtok
#define strtok(x, y) BANNED(strtok)
#undef atoi
#define atoi(x) BANNED(atoi)
#undef atol
#define atol(x) BANNED(atol)
#undef gets
#define gets(x) BANNED(gets)

#endif
