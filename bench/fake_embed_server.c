/*
 * fake_embed_server.c — `make eval`'s embedding server: the loopback fake
 * server of the tests (tests/fakeserver.c: hashed bag-of-words vectors,
 * OpenAI-style /embeddings) as a process, so the quality evaluation can run
 * clawmem's hybrid search with provider "openai" and no network. Prints its
 * base URL on one line, then serves until SIGTERM or SIGINT.
 * Usage: fake_embed_server [DIMS]   (default 256)
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "../tests/fakeserver.h"

int main(int argc, char **argv)
{
    int dims = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 256;
    if (argc > 2 || dims < 1 || dims > 4096) {
        fprintf(stderr, "usage: fake_embed_server [DIMS]\n");
        return 1;
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before the server's threads start */
    char url[64];
    fake_server *s = fake_start(dims, url);
    printf("%s\n", url);
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    fake_stop(s);
    return 0;
}
