/*
 * replace.c — atomic replacement of a file beneath a directory descriptor
 * (replace.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "path.h"
#include "replace.h"

/* Temporary files are ".clawmem-" + 16 random hex digits + ".tmp" (29 bytes,
 * whatever the note's name); earlier versions used
 * ".<name>.clawmem-<pid>.tmp". */
#define TMP_PREFIX ".clawmem-"
#define TMP_HEX    16

static bool is_temp_name(const char *name)
{
    size_t n = strlen(name), p = strlen(TMP_PREFIX);
    if (n == p + TMP_HEX + 4 && !strncmp(name, TMP_PREFIX, p) && !strcmp(name + n - 4, ".tmp")) {
        for (size_t i = p; i < p + TMP_HEX; i++)
            if (!strchr("0123456789abcdef", name[i])) return false;
        return true;
    }
    /* the old pattern */
    const char *c = strstr(name, ".clawmem-");
    if (name[0] != '.' || !c || c == name || n < 5 || strcmp(name + n - 4, ".tmp")) return false;
    for (const char *d = c + 9; d < name + n - 4; d++)
        if (*d < '0' || *d > '9') return false;
    return c + 9 < name + n - 4;
}

/* Called with the
 * directory's lock held: every writer holds it while its temporary file
 * exists, so any left now is stale, whatever its age or pid. */
void cm_replace_sweep(int dir)
{
    int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] == '.' && is_temp_name(de->d_name)) unlinkat(dir, de->d_name, 0);
    closedir(d);
}

/* Creates a temporary file in dir with O_EXCL and an unpredictable name. */
cm_rc cm_replace_temp(int dir, char name[64], int *fd, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    for (int tries = 0; tries < 16; tries++) {
        unsigned char r[TMP_HEX / 2];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            uint64_t x = (uint64_t)t.tv_nsec * 6364136223846793005u ^ (uint64_t)getpid() << 32 ^
                         (uint64_t)tries;
            memcpy(r, &x, sizeof r);
        }
        int k = snprintf(name, 64, TMP_PREFIX);
        for (size_t i = 0; i < sizeof r; i++)
            k += snprintf(name + k, (size_t)(64 - k), "%02x", r[i]);
        snprintf(name + k, (size_t)(64 - k), ".tmp");
        rc = cm_path_open_file(dir, name, O_WRONLY | O_CREAT | O_EXCL, 0644, fd, NULL, err, errlen);
        if (rc != CM_EIO || errno != EEXIST) return rc;
    }
    return cm_seterr(err, errlen, CM_EIO, "cannot create a temporary file");
}

cm_rc cm_replace_file(int dir, const char *leaf, const void *data, size_t len, mode_t mode,
                      const char *shown, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    char tmp[64] = "";
    int tfd = -1, ofd = -1;
    bool locked = false;
    if (flock(dir, LOCK_EX) < 0) FAIL(CM_EIO, "lock %s: %s", shown, strerror(errno));
    locked = true;
    cm_replace_sweep(dir);
    struct stat ost;
    rc = cm_path_open_file(dir, leaf, O_RDONLY, 0, &ofd, &ost, err, errlen);
    if (rc == CM_ENOTFOUND) rc = CM_OK;
    CHECK(rc);
    CHECK(cm_replace_temp(dir, tmp, &tfd, err, errlen));
    fchmod(tfd, ofd >= 0 ? ost.st_mode & 07777 : mode);
    for (size_t off = 0; off < len;) {
        ssize_t w = write(tfd, (const char *)data + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) FAIL(CM_EIO, "%s: %s", shown, strerror(errno));
        off += (size_t)w;
    }
    if (fsync(tfd) < 0) FAIL(CM_EIO, "%s: %s", shown, strerror(errno));
    close(tfd);
    tfd = -1;
    if (renameat(dir, tmp, dir, leaf) < 0) FAIL(CM_EIO, "rename %s: %s", shown, strerror(errno));
    tmp[0] = 0;
    fsync(dir);
out:
    if (tfd >= 0) close(tfd);
    if (ofd >= 0) close(ofd);
    if (tmp[0]) unlinkat(dir, tmp, 0);
    if (locked) flock(dir, LOCK_UN);
    return rc;
}
