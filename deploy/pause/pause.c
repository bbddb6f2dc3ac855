/*
 * splitsched-pause: the process that holds a pod sandbox's namespaces.
 *
 * containerd starts it as PID 1 of every pod (the CRI plugin's sandbox_image); the pod's
 * containers join its namespaces. It has three jobs:
 *
 *   - stay alive doing nothing: it sleeps in pause() until a signal arrives;
 *   - reap zombies: as PID 1 of a shared PID namespace it inherits every orphaned
 *     process, so on SIGCHLD it collects all children that have exited;
 *   - stop cleanly: SIGINT or SIGTERM ends it with exit status 0.
 *
 * All the work is done in the signal handlers, with async-signal-safe calls only
 * (waitpid, write, _exit), so a signal can never be lost between a check and the
 * sleep. A PID 1 ignores every signal it has no handler for; SIGKILL from outside
 * the namespace still ends it.
 *
 * Built static, so the image needs nothing but this binary:
 *   gcc -static -Os -s -o pause pause.c      (scripts/build-images.sh does this)
 *
 * Usage: pause [-v]     -v prints the version and exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define VERSION "1.0"

static void say(const char *text) {
    size_t left = strlen(text);
    while (left > 0) {
        ssize_t n = write(STDERR_FILENO, text, left);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return;
        }
        text += n;
        left -= (size_t)n;
    }
}

static void on_stop(int sig) {
    say(sig == SIGINT ? "splitsched-pause: SIGINT, exiting\n"
                      : "splitsched-pause: SIGTERM, exiting\n");
    _exit(0);
}

static void on_child(int sig) {
    (void)sig;
    int saved = errno;
    /* One SIGCHLD may stand for several exits: collect until none is left. */
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

static int handle(int sig, void (*handler)(int), int flags) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = handler;
    action.sa_flags = flags;
    sigfillset(&action.sa_mask); /* handlers never interrupt each other */
    return sigaction(sig, &action, NULL);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "-v") == 0) {
        say("splitsched-pause " VERSION "\n");
        return 0;
    }
    if (argc > 1) {
        say("usage: pause [-v]\n");
        return 2;
    }
    if (getpid() != 1) {
        say("splitsched-pause: warning: not PID 1, orphans will not be reaped here\n");
    }
    if (handle(SIGINT, on_stop, 0) != 0 || handle(SIGTERM, on_stop, 0) != 0 ||
        handle(SIGCHLD, on_child, SA_NOCLDSTOP | SA_RESTART) != 0) {
        say("splitsched-pause: sigaction failed\n");
        return 1;
    }
    /* Children that exited before the handler was in place. */
    on_child(SIGCHLD);
    for (;;) {
        pause();
    }
}
