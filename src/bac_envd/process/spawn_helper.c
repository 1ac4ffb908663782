/* bac-spawn: what a command's child does between envd's vfork and the command's exec.
 *
 * envd starts it through subprocess.Popen without a preexec_fn (so CPython takes the
 * vfork path instead of forking the whole interpreter), already in its own session, with
 * the command's cwd, environment and fds. As root it then, in this order (the order of
 * process/_spawn.py's _child_setup, which this replaces):
 *   1. raises its own oom_score_adj to the value given (before any user code runs, and
 *      while still root and dumpable: its /proc/self files are its own);
 *   2. switches credentials: setgroups, setregid, setreuid, then checks that the real,
 *      effective and saved uid and gid are all the user's (fails closed otherwise);
 *   3. for a PTY, makes fd 0 its controlling terminal (TIOCSCTTY);
 *   4. execs the command, trying each candidate path in order (envd passes the list
 *      CPython's Popen would try) and keeping the first error that is not ENOENT/ENOTDIR.
 * Any failure writes "<stage> <errno>\n" to the report fd (close-on-exec, so envd reads
 * EOF once the command is running) and exits 127: the command never runs.
 *
 * Linked statically: it runs as root with the command's environment, which must not be
 * able to steer a dynamic loader (LD_PRELOAD, LD_LIBRARY_PATH).
 *
 * argv: bac-spawn REPORT_FD OOM_SCORE FLAGS UID GID GROUPS NCAND CAND... -- ARGV...
 *   FLAGS: "-" or letters: u (switch credentials), t (take the controlling terminal)
 *   GROUPS: comma-separated gids ("-" for none)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define MAX_GROUPS 65536

static int report_fd = -1;

static void fail(const char *stage, int err) {
    char line[64];
    int n = snprintf(line, sizeof line, "%s %d\n", stage, err);
    if (report_fd >= 0 && n > 0) {
        ssize_t ignored = write(report_fd, line, (size_t)n);
        (void)ignored;
    }
    _exit(127);
}

static long parse_long(const char *text, long min, long max) {
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < min || value > max)
        fail("usage", EINVAL);
    return value;
}

static gid_t groups[MAX_GROUPS];

int main(int argc, char **argv) {
    if (argc < 10)
        _exit(127);
    report_fd = (int)parse_long(argv[1], 3, INT_MAX);
    if (fcntl(report_fd, F_SETFD, FD_CLOEXEC) != 0)
        fail("usage", errno);
    const char *oom_score = argv[2];
    const char *flags = argv[3];
    int switch_ids = strchr(flags, 'u') != NULL;
    int take_tty = strchr(flags, 't') != NULL;
    uid_t uid = (uid_t)parse_long(argv[4], 0, (long)UINT_MAX - 1);
    gid_t gid = (gid_t)parse_long(argv[5], 0, (long)UINT_MAX - 1);
    size_t ngroups = 0;
    if (strcmp(argv[6], "-") != 0) {
        char *list = argv[6];
        for (char *item = strtok(list, ","); item != NULL; item = strtok(NULL, ",")) {
            if (ngroups == MAX_GROUPS)
                fail("usage", E2BIG);
            groups[ngroups++] = (gid_t)parse_long(item, 0, (long)UINT_MAX - 1);
        }
    }
    long ncand = parse_long(argv[7], 1, argc);
    if (8 + ncand + 1 >= argc || strcmp(argv[8 + ncand], "--") != 0)
        fail("usage", EINVAL);
    char **candidates = argv + 8;
    char **command = argv + 8 + ncand + 1;

    /* 1. The OOM killer's first choice, before anything of the user's runs. */
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        fail("oom", errno);
    size_t len = strlen(oom_score);
    if (write(fd, oom_score, len) != (ssize_t)len)
        fail("oom", errno ? errno : EIO);
    close(fd);

    /* 2. SECURITY: groups, gid, uid in this order (setgroups needs root, setreuid last),
     * then no root id may be left in any of the real, effective or saved slots. */
    if (switch_ids) {
        if (setgroups(ngroups, groups) != 0)
            fail("cred", errno);
        if (setregid(gid, gid) != 0)
            fail("cred", errno);
        if (setreuid(uid, uid) != 0)
            fail("cred", errno);
        uid_t r, e, s;
        gid_t rg, eg, sg;
        if (getresuid(&r, &e, &s) != 0 || getresgid(&rg, &eg, &sg) != 0)
            fail("cred", errno);
        if (r != uid || e != uid || s != uid || rg != gid || eg != gid || sg != gid)
            fail("cred", EPERM);
    }

    /* 3. After the session Popen made: the PTY slave on fd 0 becomes its terminal. */
    if (take_tty && ioctl(0, TIOCSCTTY, 0) != 0)
        fail("ctty", errno);

    /* 4. The command, as CPython's child would exec it. */
    extern char **environ;
    int first_error = 0;
    for (long i = 0; i < ncand; i++) {
        execve(candidates[i], command, environ);
        if (errno != ENOENT && errno != ENOTDIR && first_error == 0)
            first_error = errno;
    }
    fail("exec", first_error ? first_error : errno);
    return 127;
}
