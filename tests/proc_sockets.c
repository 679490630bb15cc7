/*
 * A process's sockets as /proc shows them (see proc_sockets.h).
 */
#include "proc_sockets.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The socket inodes among pid's file descriptors; how many (at most max). */
static size_t socket_inodes(pid_t pid, unsigned long *out, size_t max)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        char path[400], link[128];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t len = readlink(path, link, sizeof link - 1);
        if (len <= 0)
            continue;
        link[len] = '\0';
        unsigned long inode;
        if (sscanf(link, "socket:[%lu]", &inode) == 1)
            out[n++] = inode;
    }
    closedir(d);
    return n;
}

/* The TCP socket `inode` in /proc/net/tcp or tcp6: its state (hex, 0x0A is
 * LISTEN) and its local and remote ports.  1 when found. */
static int tcp_socket(unsigned long inode, int *state, int *lport, int *rport)
{
    static const char *const files[] = { "/proc/net/tcp", "/proc/net/tcp6" };
    for (size_t f = 0; f < 2; f++) {
        FILE *fp = fopen(files[f], "r");
        if (!fp)
            continue;
        char line[512];
        int found = 0;
        while (!found && fgets(line, sizeof line, fp)) {
            char local[64], remote[64];
            unsigned st;
            unsigned long ino;
            if (sscanf(line, " %*d: %63s %63s %x %*s %*s %*s %*s %*s %lu", local, remote,
                       &st, &ino) != 4 || ino != inode)
                continue;
            const char *lp = strrchr(local, ':'), *rp = strrchr(remote, ':');
            *lport = lp ? (int)strtol(lp + 1, NULL, 16) : 0;
            *rport = rp ? (int)strtol(rp + 1, NULL, 16) : 0;
            *state = (int)st;
            found = 1;
        }
        fclose(fp);
        if (found)
            return 1;
    }
    return 0;
}

/* The unix socket `inode` in /proc/net/unix: its path ("" when it has
 * none).  1 when found. */
static int unix_socket(unsigned long inode, char *path, size_t len)
{
    FILE *fp = fopen("/proc/net/unix", "r");
    if (!fp)
        return 0;
    char line[600];
    int found = 0;
    while (!found && fgets(line, sizeof line, fp)) {
        unsigned long ino;
        char name[400] = "";
        if (sscanf(line, "%*s %*s %*s %*s %*s %*s %lu %399s", &ino, name) < 1 || ino != inode)
            continue;
        snprintf(path, len, "%s", name);
        found = 1;
    }
    fclose(fp);
    return found;
}

void ps_look_at_sockets(pid_t pid, const int *ports, size_t nports,
                            struct sockets_seen *seen)
{
    memset(seen, 0, sizeof *seen);
    unsigned long inodes[256];
    size_t n = socket_inodes(pid, inodes, 256);
    for (size_t i = 0; i < n; i++) {
        int state, lport, rport;
        char path[400];
        size_t used = strlen(seen->why);
        if (tcp_socket(inodes[i], &state, &lport, &rport)) {
            if (state == 0x0A)
                continue;
            seen->connected++;
            for (size_t p = 0; p < nports; p++)
                seen->to_ports += rport == ports[p];
            snprintf(seen->why + used, sizeof seen->why - used, " tcp :%d->:%d (state %02X);",
                     lport, rport, state);
        } else if (unix_socket(inodes[i], path, sizeof path) && path[0]) {
            seen->named_unix++;
            snprintf(seen->why + used, sizeof seen->why - used, " unix %s;", path);
        }
    }
}

/* The children of pid (from /proc/PID/task/PID/children); how many. */
static size_t children_of(pid_t pid, pid_t *out, size_t max)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return 0;
    size_t n = 0;
    long p;
    while (n < max && fscanf(fp, "%ld", &p) == 1)
        out[n++] = (pid_t)p;
    fclose(fp);
    return n;
}

int ps_children_connected_to(pid_t pid, int port)
{
    pid_t kids[64];
    size_t n = children_of(pid, kids, 64);
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        struct sockets_seen seen;
        ps_look_at_sockets(kids[i], &port, 1, &seen);
        found += seen.to_ports;
    }
    return found;
}
