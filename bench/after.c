/*
 * after.c — what a process costs right after another one: for ROUNDS rounds,
 * and in each round for every CONDITION in turn, runs the condition's
 * pre-command (if any), waits its gap, then runs the measured command, and
 * prints per condition the medians of the measured process's
 *   wall_ms    fork to reaped (this program's monotonic clock),
 *   oncpu_ms   its time on a CPU (/proc/PID/schedstat, read before reaping;
 *              steal time excluded where the kernel accounts it),
 *   rqwait_ms  its time runnable but waiting for a CPU (the same file),
 *   minflt     its minor page faults (getrusage of the child),
 *   ivcs       its involuntary context switches.
 * wall - oncpu - rqwait is what neither explains: fork and exec in the
 * parent, and a virtual CPU the host did not run.
 * Usage: after ROUNDS 'MEASURED COMMAND' 'LABEL|GAP_US|PRE COMMAND or -[|MEASURED]'...
 * (commands are split at spaces, no shell; a fourth field replaces the
 * measured command for that condition). Build: cc -O2 -o after bench/after.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct meas {
    double wall, cpu, delay, flt, ivcs;
} meas;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The words of s (a copy, split at spaces), NULL-terminated. */
static char **split(const char *s)
{
    char *d = strdup(s), *save = NULL;
    char **v = calloc(strlen(s) / 2 + 2, sizeof *v);
    int n = 0;
    if (!d || !v) exit(1);
    for (char *t = strtok_r(d, " ", &save); t; t = strtok_r(NULL, " ", &save))
        v[n++] = t;
    return v;
}

static meas run(char **argv)
{
    meas m = {0};
    double t0 = now_s();
    pid_t p = fork();
    if (p < 0) exit(1);
    if (p == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    siginfo_t si;
    waitid(P_PID, (id_t)p, &si, WEXITED | WNOWAIT); /* a zombie keeps its schedstat */
    char fn[64];
    snprintf(fn, sizeof fn, "/proc/%d/schedstat", (int)p);
    unsigned long long on = 0, wait = 0;
    FILE *f = fopen(fn, "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &on, &wait) != 2) on = wait = 0;
        fclose(f);
    }
    int st;
    struct rusage r;
    wait4(p, &st, 0, &r);
    m.wall = (now_s() - t0) * 1e3;
    m.cpu = (double)on / 1e6;
    m.delay = (double)wait / 1e6;
    m.flt = (double)r.ru_minflt;
    m.ivcs = (double)r.ru_nivcsw;
    return m;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const meas *v, int n, size_t off, double *tmp)
{
    for (int i = 0; i < n; i++)
        memcpy(&tmp[i], (const char *)&v[i] + off, sizeof(double));
    qsort(tmp, (size_t)n, sizeof *tmp, cmp);
    return tmp[n / 2];
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s ROUNDS 'MEASURED' 'LABEL|GAP_US|PRE or -[|MEASURED]'...\n",
                argv[0]);
        return 2;
    }
    int rounds = atoi(argv[1]), nc = argc - 3;
    if (rounds < 1) return 2;
    char **cmd = split(argv[2]);
    char ***pre = calloc((size_t)nc, sizeof *pre),
         ***measured = calloc((size_t)nc, sizeof *measured);
    char **label = calloc((size_t)nc, sizeof *label);
    long *gap = calloc((size_t)nc, sizeof *gap);
    meas *res = calloc((size_t)nc * (size_t)rounds, sizeof *res);
    double *tmp = calloc((size_t)rounds, sizeof *tmp);
    if (!pre || !measured || !label || !gap || !res || !tmp) return 1;
    for (int c = 0; c < nc; c++) {
        char *spec = strdup(argv[3 + c]), *save = NULL;
        label[c] = strtok_r(spec, "|", &save);
        char *g = strtok_r(NULL, "|", &save), *p = strtok_r(NULL, "|", &save);
        char *m = strtok_r(NULL, "|", &save);
        if (!label[c] || !g || !p) return 2;
        gap[c] = atol(g);
        pre[c] = strcmp(p, "-") ? split(p) : NULL;
        measured[c] = m ? split(m) : cmd;
    }
    for (int i = 0; i < rounds; i++)
        for (int c = 0; c < nc; c++) {
            if (pre[c]) run(pre[c]);
            if (gap[c]) usleep((useconds_t)gap[c]);
            res[c * rounds + i] = run(measured[c]);
        }
    printf("%-24s %8s %8s %9s %7s %5s\n", "condition", "wall_ms", "oncpu_ms", "rqwait_ms", "minflt",
           "ivcs");
    for (int c = 0; c < nc; c++) {
        const meas *v = res + c * rounds;
        printf("%-24s %8.2f %8.2f %9.2f %7.0f %5.0f\n", label[c],
               median(v, rounds, offsetof(meas, wall), tmp),
               median(v, rounds, offsetof(meas, cpu), tmp),
               median(v, rounds, offsetof(meas, delay), tmp),
               median(v, rounds, offsetof(meas, flt), tmp),
               median(v, rounds, offsetof(meas, ivcs), tmp));
    }
    return 0;
}
