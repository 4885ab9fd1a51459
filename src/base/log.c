/*
 * log.c — formats a message and hands it to the logger callback.
 */
#include "log.h"

void cm_logf(const cm_logger *lg, cm_log_level level, const char *fmt, ...)
{
    if (!lg || !lg->fn) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cm_msg_clean(msg, sizeof msg);
    lg->fn(lg->ctx, level, msg);
}
