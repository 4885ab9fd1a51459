/*
 * log.h — the library's diagnostics go through a caller-supplied callback
 * (cm_options.log); library code never prints. A NULL callback drops them.
 */
#ifndef CM_LOG_H
#define CM_LOG_H

#include "common.h"

typedef struct cm_logger {
    cm_log_fn fn;
    void *ctx;
} cm_logger;

void cm_logf(const cm_logger *lg, cm_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
