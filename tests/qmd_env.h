/*
 * qmd_env.h — what the QMD backend tests share: a temporary state and
 * workspace with its config (qenv), opening and searching an engine over it,
 * the payload and status accessors, an injectable clock, and the check that
 * no process started with the test's QMD home is left behind (/proc).
 */
#ifndef CM_TEST_QMD_ENV_H
#define CM_TEST_QMD_ENV_H

#include <jansson.h>

#include "clawmem.h"
#include "test.h"

typedef struct qenv {
    char *dir;
    char ws[1024], state[1024], cfg[1024], fake[1024];
    buf log;
} qenv;

void qenv_init(qenv *q, const char *config);

cm_engine *qopen(qenv *q);

/* The payload of a search as session key (NULL: none); NULL on failure. */
json_t *qsearch(cm_engine *e, const char *query, const char *key);

size_t nresults(const json_t *o);

const char *r_str(const json_t *o, size_t i, const char *k);

json_t *qstatus(cm_engine *e);

/* Processes (other than this one) whose environment names dir: what a
 * sidecar run left behind. */
int leftovers(const char *dir);

/* Leftovers that outlive a kill: a process SIGKILLed with its group leaves
 * /proc when the kernel gets to it, which on a loaded machine is after the
 * kill returns, so the count may fall for up to 5 s; one not killed (a sleep
 * 30 left running) is still counted then. */
int leftovers_settled(const char *dir);

#define EXPECT_NO_LEFTOVERS(q) EXPECT_INT(leftovers_settled((q)->dir), 0)

void qenv_release(qenv *q);

#define DIRECT "agent:main:telegram:direct:42"

extern int64_t fake_now;

int64_t fake_clock(void *ctx);

#endif
