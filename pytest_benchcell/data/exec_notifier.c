/*
 * pytest-benchcell's exec notifier: runs one command and writes, in strace's `-f` log syntax, every
 * program its process tree starts, the connects it makes and how its processes end.
 *
 *     exec_notifier [-c] -o LOG -- COMMAND [ARG...]
 *
 * Built from this file on first use with the machine's C compiler (isolation/exec_audit/notifier.py),
 * and used for a trial's Bash commands in place of strace. strace follows every process with ptrace:
 * each fork, program start and exit stops the process and wakes strace, which is most of what a
 * command costs under the audit. Here the kernel's seccomp filter stops a process only at the calls
 * that matter (execve, execveat, connect, exit_group) and hands each to this process over a seccomp
 * user-notification listener; nothing stops at a fork.
 *
 * What it writes, per call (the lines parse_strace reads):
 * - execve/execveat: the path and argv, read from the caller's memory before the kernel runs the
 *   call (a call whose memory cannot be read here is refused with EPERM, never run unseen), and its
 *   outcome, decided the way the kernel decides it: the path walked one component at a time from the
 *   caller's own root or folder (/proc/PID/root, /proc/PID/cwd: `resolve`), a regular file, on a
 *   mount without noexec, executable by the caller's user, starting with an ELF header or `#!`. A
 *   path through /proc (/dev/fd/3, /proc/self/exe: the caller's own files) is written as started. A
 *   failed start (most of a PATH search) is written with its error and path only.
 * - the process tree: a process is introduced by `PARENT clone(...) = PID` lines when it first calls
 *   one of those, its parent read from /proc; a process that ends hands its children over first (read
 *   from /proc/PID/task/TID/children), so a child that outlives its parent keeps its real parent.
 * - connect: performed here on the caller's own socket (pidfd_getfd), on a thread of its own, and its
 *   real result returned to the caller and written: an endpoint the sandbox refuses shows as such.
 * - exit_group: `+++ exited with N +++`. A process killed by a signal leaves no line.
 * Calls of another architecture's convention (32-bit calls from a 64-bit process, x32) end the
 * process, as the sandbox's own filter does: they would start programs unseen.
 *
 * -c: run on the CPU this process starts on, with the command (a notification then costs a task
 * switch on one CPU instead of waking another). The exit status is the command's (128 + signal when
 * a signal ended it). The log is written before a program it records starts, and whenever no call
 * is waiting.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <limits.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#define FOREIGN_BIT 0x40000000u /* x32 */
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "exec_notifier: unsupported architecture"
#endif

#define MAX_STRING 65536  /* as strace's -s of the audit: longer strings are cut, marked "..." */
#define MAX_ARGS 4096
#define PID_LIMIT 4194304 /* the kernel's largest pid_max */

static FILE *out;
static int listener = -1;
static unsigned char known[PID_LIMIT / 8];

static int is_known(pid_t pid) { return pid > 0 && pid < PID_LIMIT && (known[pid >> 3] >> (pid & 7)) & 1; }
static void set_known(pid_t pid) {
    if (pid > 0 && pid < PID_LIMIT) known[pid >> 3] |= (unsigned char)(1 << (pid & 7));
}

/* One log line is built in memory and written with one fwrite, so connect threads never interleave. */
struct line {
    char *text;
    size_t size;
    FILE *stream;
};
static void line_open(struct line *line) { line->stream = open_memstream(&line->text, &line->size); }
static void line_close(struct line *line) {
    fclose(line->stream);
    fwrite(line->text, 1, line->size, out);
    free(line->text);
}

static long read_memory(pid_t pid, unsigned long address, void *buffer, size_t length) {
    struct iovec local = {buffer, length}, remote = {(void *)address, length};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

/* A NUL-terminated string of the caller's, page by page (a string may end just before unmapped
 * memory). Returns its length (MAX_STRING - 1 when cut, *cut set) or -1 when unreadable. */
static long read_string(pid_t pid, unsigned long address, char *buffer, int *cut) {
    size_t got = 0;
    *cut = 0;
    while (got < MAX_STRING - 1) {
        size_t page = 4096 - ((address + got) & 4095);
        size_t want = page < MAX_STRING - 1 - got ? page : MAX_STRING - 1 - got;
        long n = read_memory(pid, address + got, buffer + got, want);
        if (n <= 0) return got ? (long)got : -1;
        char *end = memchr(buffer + got, 0, (size_t)n);
        if (end) return end - buffer;
        got += (size_t)n;
    }
    buffer[got] = 0;
    *cut = 1;
    return (long)got;
}

static void put_string(FILE *stream, const char *text, long length, int cut) {
    fputc('"', stream);
    for (long i = 0; i < length; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '"' || c == '\\') fprintf(stream, "\\%c", c);
        else if (c >= 32 && c < 127) fputc(c, stream);
        else fprintf(stream, "\\x%02x", c);
    }
    fputc('"', stream);
    if (cut) fputs("...", stream);
}

static ssize_t read_proc(pid_t pid, pid_t tid, const char *name, char *buffer, size_t size) {
    char path[96];
    if (tid) snprintf(path, sizeof path, "/proc/%d/task/%d/%s", pid, tid, name);
    else snprintf(path, sizeof path, "/proc/%d/%s", pid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buffer, size - 1);
    close(fd);
    if (n >= 0) buffer[n] = 0;
    return n;
}

struct caller {
    pid_t tgid, ppid;
    uid_t euid;
    gid_t egid;
    gid_t groups[64];
    int group_count;
};

/* The caller's process (a thread's group), parent and effective identity, from /proc/TID/status. */
static int read_caller(pid_t tid, struct caller *caller) {
    char buffer[4096];
    if (read_proc(tid, 0, "status", buffer, sizeof buffer) <= 0) return -1;
    caller->tgid = tid;
    caller->ppid = 0;
    caller->euid = caller->egid = (uid_t)-1;
    caller->group_count = 0;
    for (char *line = buffer; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        unsigned a, b;
        if (sscanf(line, "Tgid: %d", &caller->tgid) == 1) continue;
        if (sscanf(line, "PPid: %d", &caller->ppid) == 1) continue;
        if (sscanf(line, "Uid: %u %u", &a, &b) == 2) { caller->euid = b; continue; }
        if (sscanf(line, "Gid: %u %u", &a, &b) == 2) { caller->egid = b; continue; }
        if (strncmp(line, "Groups:", 7) == 0) {
            char *at = line + 7, *end;
            while (caller->group_count < 64) {
                unsigned long group = strtoul(at, &end, 10);
                if (end == at) break;
                caller->groups[caller->group_count++] = (gid_t)group;
                at = end;
            }
        }
    }
    return 0;
}

static pid_t parent_of(pid_t pid) {
    struct caller caller;
    return read_caller(pid, &caller) == 0 ? caller.ppid : 0;
}

/* Write the forks that lead from a process already in the log down to `pid`. */
static void introduce(pid_t pid) {
    pid_t chain[128];
    int depth = 0;
    pid_t at = pid;
    while (!is_known(at) && depth < 128) {
        chain[depth++] = at;
        at = parent_of(at);
        if (at <= 0) break;
    }
    if (at <= 0 || !is_known(at)) { /* not below the command (its parent left before it was seen) */
        for (int i = 0; i < depth; i++) set_known(chain[i]);
        for (int i = depth - 2; i >= 0; i--) fprintf(out, "%d clone(child_stack=NULL) = %d\n", chain[i + 1], chain[i]);
        return;
    }
    for (int i = depth - 1; i >= 0; i--) {
        fprintf(out, "%d clone(child_stack=NULL) = %d\n", i == depth - 1 ? at : chain[i + 1], chain[i]);
        set_known(chain[i]);
    }
}

/* A process about to end: its children (of every thread) get their parent in the log now, while
 * /proc still says who it is. */
static void hand_over_children(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *tasks = opendir(path);
    if (!tasks) return;
    for (struct dirent *entry; (entry = readdir(tasks));) {
        pid_t tid = atoi(entry->d_name);
        char children[8192];
        if (tid <= 0 || read_proc(pid, tid, "children", children, sizeof children) <= 0) continue;
        for (char *word = strtok(children, " \n"); word; word = strtok(NULL, " \n")) {
            pid_t child = atoi(word);
            if (child > 0 && !is_known(child)) {
                fprintf(out, "%d clone(child_stack=NULL) = %d\n", pid, child);
                set_known(child);
            }
        }
    }
    closedir(tasks);
}

static int in_groups(const struct caller *caller, gid_t group) {
    if (group == caller->egid) return 1;
    for (int i = 0; i < caller->group_count; i++)
        if (caller->groups[i] == group) return 1;
    return 0;
}

#define UNCERTAIN (-100000)
#define PROC_MAGIC 0x9fa0

/* The file `path` names for the process whose root is `root` and whose folder is `base` (taken over),
 * walked one component at a time as the kernel walks it: an absolute link starts again from that
 * root, ".." never climbs above it. Returns an fd of the file (O_RDONLY where it can be read, else
 * O_PATH), -errno when the kernel would refuse the path, or UNCERTAIN when the walk enters /proc,
 * whose "self" and fd links mean the caller, not this process (such a start is recorded as made). */
static int resolve(int root, int base, const char *path) {
    static char work[2 * MAX_STRING];
    char component[NAME_MAX + 1];
    struct stat root_status, status;
    struct statfs filesystem;
    int dir = base, links = 0;
    size_t length = strlen(path);
    if (length == 0) {
        close(dir);
        return -ENOENT;
    }
    if (length >= sizeof work || fstat(root, &root_status) != 0) {
        close(dir);
        return UNCERTAIN;
    }
    memcpy(work, path, length + 1);
    char *rest = work;
    for (;;) {
        while (*rest == '/') rest++;
        if (*rest == 0) { /* the path ended on a folder */
            close(dir);
            return -EACCES;
        }
        char *slash = strchr(rest, '/');
        size_t size = slash ? (size_t)(slash - rest) : strlen(rest);
        if (size > NAME_MAX) {
            close(dir);
            return -ENAMETOOLONG;
        }
        memcpy(component, rest, size);
        component[size] = 0;
        rest += size;
        int last = strspn(rest, "/") == strlen(rest);
        if (strcmp(component, ".") == 0 && !last) continue;
        if (strcmp(component, "..") == 0) {
            struct stat here;
            if (fstat(dir, &here) == 0 && here.st_dev == root_status.st_dev && here.st_ino == root_status.st_ino) {
                if (last) break;
                continue; /* ".." of the root is the root */
            }
        }
        int next = openat(dir, component, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            int error = errno;
            close(dir);
            return -error;
        }
        if (fstatfs(next, &filesystem) == 0 && filesystem.f_type == PROC_MAGIC) {
            close(next);
            close(dir);
            return UNCERTAIN;
        }
        if (fstat(next, &status) != 0) {
            close(next);
            close(dir);
            return UNCERTAIN;
        }
        if (S_ISLNK(status.st_mode)) {
            char target[PATH_MAX];
            ssize_t n = readlinkat(next, "", target, sizeof target - 1);
            close(next);
            if (n <= 0 || ++links > 40) {
                close(dir);
                return n <= 0 ? UNCERTAIN : -ELOOP;
            }
            target[n] = 0;
            size_t left = strlen(rest);
            if ((size_t)n + 1 + left >= sizeof work) {
                close(dir);
                return UNCERTAIN;
            }
            memmove(work + n + 1, rest, left + 1); /* the link's target, then what was left */
            memcpy(work, target, (size_t)n);
            work[n] = '/';
            if (left == 0) work[n] = 0;
            rest = work;
            if (target[0] == '/') {
                close(dir);
                dir = dup(root);
            }
            continue;
        }
        if (last) {
            close(dir);
            if (!S_ISREG(status.st_mode)) {
                close(next);
                return -EACCES;
            }
            char reopen[64];
            snprintf(reopen, sizeof reopen, "/proc/self/fd/%d", next);
            int readable = open(reopen, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
            if (readable >= 0) {
                close(next);
                return readable;
            }
            return next; /* unreadable here: its type and mode still decide */
        }
        if (!S_ISDIR(status.st_mode)) {
            close(next);
            close(dir);
            return -ENOTDIR;
        }
        close(dir);
        dir = next;
    }
    close(dir); /* the path ended on ".." at the root: a folder */
    return -EACCES;
}

/* What the kernel says to starting the open file `fd` (closed here): 0, or the error. */
static int judge_file(int fd, const struct caller *caller) {
    struct stat status;
    struct statvfs mount;
    int outcome = 0;
    if (fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) outcome = EACCES;
    else if (fstatvfs(fd, &mount) == 0 && (mount.f_flag & ST_NOEXEC)) outcome = EACCES;
    else {
        mode_t bit = caller->euid == 0 ? (status.st_mode & 0111 ? 1 : 0)
                     : caller->euid == status.st_uid ? status.st_mode & S_IXUSR
                     : in_groups(caller, status.st_gid) ? status.st_mode & S_IXGRP
                     : status.st_mode & S_IXOTH;
        if (!bit) outcome = EACCES;
        else {
            char magic[4];
            ssize_t n = pread(fd, magic, sizeof magic, 0);
            /* unreadable (mode 0711): the kernel still starts it; a script needs reading, a binary not */
            if (n >= 0 && !(n == 4 && memcmp(magic, "\177ELF", 4) == 0) && !(n >= 2 && magic[0] == '#' && magic[1] == '!'))
                outcome = ENOEXEC;
        }
    }
    close(fd);
    return outcome;
}

/* The error execve will return for this path, or 0 when it will start the program. */
static int exec_outcome(pid_t tid, const struct caller *caller, int folder, const char *path, int relative_to_fd,
                        int empty_path) {
    char link[64];
    int fd;
    if (path[0] == 0 && empty_path && relative_to_fd) { /* execveat(fd, "", ..., AT_EMPTY_PATH): fexecve */
        snprintf(link, sizeof link, "/proc/%d/fd/%d", tid, folder);
        fd = open(link, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0 && errno == EACCES) fd = open(link, O_PATH | O_CLOEXEC);
        if (fd < 0) return errno == ENOENT ? EBADF : errno;
        return judge_file(fd, caller);
    }
    int root, base;
    snprintf(link, sizeof link, "/proc/%d/root", tid);
    root = open(link, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) return 0; /* cannot tell: recorded as started, never as a start that failed */
    if (relative_to_fd) snprintf(link, sizeof link, "/proc/%d/fd/%d", tid, folder);
    else snprintf(link, sizeof link, "/proc/%d/cwd", tid);
    base = path[0] == '/' ? dup(root) : open(link, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (base < 0) {
        close(root);
        return relative_to_fd ? EBADF : 0;
    }
    fd = resolve(root, base, path);
    close(root);
    if (fd == UNCERTAIN) return 0;
    if (fd < 0) return -fd;
    return judge_file(fd, caller);
}

static char path_buffer[MAX_STRING], argument_buffer[MAX_STRING];

/* Returns the error to answer the call with instead of letting it run, or 0. */
static int on_exec(const struct seccomp_notif *request, int at) {
    pid_t tid = request->pid;
    struct caller caller;
    if (read_caller(tid, &caller) != 0) return 0; /* gone: the call will not run */
    int cut;
    long length = read_string(tid, request->data.args[at ? 1 : 0], path_buffer, &cut);
    if (length < 0 && errno == EFAULT) return 0; /* a bad address: the kernel refuses it as well */
    if (length < 0) {
        /* Its memory cannot be read here (a process that made itself non-dumpable, as another user
         * than root without the sandbox): the start is refused rather than run unseen. */
        introduce(caller.tgid);
        fprintf(out, "%d %s(\"?\", 0x0, 0x0) = -1 EPERM (the exec notifier could not read the path)\n",
                caller.tgid, at ? "execveat" : "execve");
        fflush(out);
        return EPERM;
    }
    int folder = (int)request->data.args[0];
    int error = exec_outcome(tid, &caller, folder, path_buffer, at && folder != AT_FDCWD,
                             at && (request->data.args[4] & AT_EMPTY_PATH));
    introduce(caller.tgid);
    struct line line;
    line_open(&line);
    fprintf(line.stream, "%d %s(", caller.tgid, at ? "execveat" : "execve");
    if (at) fprintf(line.stream, "%d, ", folder);
    put_string(line.stream, path_buffer, length, cut);
    if (error) {
        const char *name = strerrorname_np(error);
        fprintf(line.stream, ", 0x0, 0x0) = -1 %s (%s)\n", name ? name : "EACCES", strerror(error));
        line_close(&line);
        return 0;
    }
    fputs(", [", line.stream);
    unsigned long argv = request->data.args[at ? 2 : 1];
    unsigned long pointers[64];
    int count = 0, ended = 0;
    while (!ended && count < MAX_ARGS) {
        long got = read_memory(tid, argv + count * sizeof(unsigned long), pointers, sizeof pointers);
        if (got < (long)sizeof(unsigned long)) break;
        for (long i = 0; i < got / (long)sizeof(unsigned long) && count < MAX_ARGS; i++) {
            if (!pointers[i]) { ended = 1; break; }
            long n = read_string(tid, pointers[i], argument_buffer, &cut);
            if (count++) fputs(", ", line.stream);
            put_string(line.stream, argument_buffer, n < 0 ? 0 : n, cut || n < 0);
        }
    }
    if (!ended) fputs(", ...", line.stream);
    fputs("], 0x0 /* env */) = 0\n", line.stream);
    line_close(&line);
    fflush(out); /* a program that starts is in the log before its first instruction */
    return 0;
}

struct pending_connect {
    unsigned long long id;
    pid_t tgid;
    int socket;   /* the caller's socket, duplicated here */
    int number;   /* its number in the caller */
    socklen_t length;
    unsigned char address[128];
};

static void describe_address(FILE *stream, const unsigned char *address, socklen_t length) {
    sa_family_t family;
    memcpy(&family, address, sizeof family);
    char text[INET6_ADDRSTRLEN];
    if (family == AF_INET && length >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in inet;
        memcpy(&inet, address, sizeof inet);
        inet_ntop(AF_INET, &inet.sin_addr, text, sizeof text);
        fprintf(stream, "{sa_family=AF_INET, sin_port=htons(%u), sin_addr=inet_addr(\"%s\")}", ntohs(inet.sin_port), text);
    } else if (family == AF_INET6 && length >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 inet6;
        memcpy(&inet6, address, sizeof inet6);
        inet_ntop(AF_INET6, &inet6.sin6_addr, text, sizeof text);
        fprintf(stream, "{sa_family=AF_INET6, sin6_port=htons(%u), inet_pton(AF_INET6, \"%s\", &sin6_addr)}", ntohs(inet6.sin6_port), text);
    } else if (family == AF_UNIX && length > offsetof(struct sockaddr_un, sun_path)) {
        const char *path = (const char *)address + offsetof(struct sockaddr_un, sun_path);
        long size = (long)length - (long)offsetof(struct sockaddr_un, sun_path);
        int abstract = size > 0 && path[0] == 0;
        fputs(abstract ? "{sa_family=AF_UNIX, sun_path=@" : "{sa_family=AF_UNIX, sun_path=", stream);
        const char *start = path + abstract;
        long n = abstract ? size - 1 : (long)strnlen(path, (size_t)size);
        put_string(stream, start, n, 0);
        fputc('}', stream);
    } else {
        fprintf(stream, "{sa_family=%u}", family);
    }
}

static void *finish_connect(void *argument) {
    struct pending_connect *call = argument;
    int result = connect(call->socket, (struct sockaddr *)call->address, call->length);
    int error = result == 0 ? 0 : errno;
    close(call->socket);
    struct line line; /* written before the caller goes on: a process's lines stay in the order of its calls */
    line_open(&line);
    fprintf(line.stream, "%d connect(%d, ", call->tgid, call->number);
    describe_address(line.stream, call->address, call->length);
    if (error) {
        const char *name = strerrorname_np(error);
        fprintf(line.stream, ", %u) = -1 %s (%s)\n", call->length, name ? name : "EIO", strerror(error));
    } else {
        fprintf(line.stream, ", %u) = 0\n", call->length);
    }
    line_close(&line);
    fflush(out);
    struct seccomp_notif_resp response = {.id = call->id, .val = 0, .error = error ? -error : 0, .flags = 0};
    ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &response);
    free(call);
    return NULL;
}

/* Returns 1 when the call was taken over (answered by a thread), 0 to let the kernel run it. */
static int on_connect(const struct seccomp_notif *request) {
    struct caller caller;
    if (read_caller(request->pid, &caller) != 0) return 0;
    struct pending_connect *call = calloc(1, sizeof *call);
    if (!call) return 0;
    call->id = request->id;
    call->tgid = caller.tgid;
    call->number = (int)request->data.args[0];
    call->length = (socklen_t)request->data.args[2];
    if (call->length < sizeof(sa_family_t) || call->length > sizeof call->address ||
        read_memory(request->pid, request->data.args[1], call->address, call->length) != (long)call->length) {
        free(call);
        return 0;
    }
    int process = (int)syscall(SYS_pidfd_open, caller.tgid, 0);
    call->socket = process < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, process, call->number, 0);
    if (process >= 0) close(process);
    /* the caller must still be waiting in this call for the socket to be the one it named */
    if (call->socket < 0 || ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &call->id) != 0) {
        if (call->socket >= 0) close(call->socket);
        free(call);
        return 0;
    }
    introduce(caller.tgid);
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attributes, 64 * 1024);
    if (pthread_create(&thread, &attributes, finish_connect, call) != 0) finish_connect(call);
    pthread_attr_destroy(&attributes);
    return 1;
}

static void on_exit_group(const struct seccomp_notif *request) {
    struct caller caller;
    if (read_caller(request->pid, &caller) != 0) return;
    introduce(caller.tgid);
    hand_over_children(caller.tgid);
    fprintf(out, "%d +++ exited with %d +++\n", caller.tgid, (int)(request->data.args[0] & 0xff));
}

static int install_filter(void) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef FOREIGN_BIT
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, FOREIGN_BIT, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
#endif
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execve, 4, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execveat, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_connect, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
    };
    struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &program);
}

static int send_descriptor(int channel, int fd) {
    char byte = 0, control[CMSG_SPACE(sizeof(int))];
    struct iovec io = {&byte, 1};
    struct msghdr message = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &fd, sizeof fd);
    return sendmsg(channel, &message, 0) == 1 ? 0 : -1;
}

static int receive_descriptor(int channel) {
    char byte, control[CMSG_SPACE(sizeof(int))];
    struct iovec io = {&byte, 1};
    struct msghdr message = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    if (recvmsg(channel, &message, 0) != 1) return -1;
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    if (!header || header->cmsg_type != SCM_RIGHTS) return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(header), sizeof fd);
    return fd;
}

/* The command's program as execvp would find it, searched here so the log does not start with the
 * notifier's own PATH search (strace searches before tracing, too). */
static const char *find_program(const char *name) {
    static char found[4096];
    const char *path = getenv("PATH");
    if (strchr(name, '/') || !path) return name;
    for (const char *at = path; at;) {
        const char *end = strchr(at, ':');
        size_t length = end ? (size_t)(end - at) : strlen(at);
        if (snprintf(found, sizeof found, "%.*s/%s", (int)length, length ? at : ".", name) < (int)sizeof found) {
            struct stat status;
            if (stat(found, &status) == 0 && S_ISREG(status.st_mode) && access(found, X_OK) == 0) return found;
        }
        at = end ? end + 1 : NULL;
    }
    return name;
}

int main(int argc, char **argv) {
    int pin = 0, at = 1;
    const char *log = NULL;
    for (; at < argc; at++) {
        if (strcmp(argv[at], "-c") == 0) pin = 1;
        else if (strcmp(argv[at], "-o") == 0 && at + 1 < argc) log = argv[++at];
        else if (strcmp(argv[at], "--") == 0) { at++; break; }
        else break;
    }
    if (!log || at >= argc) {
        fprintf(stderr, "usage: exec_notifier [-c] -o LOG -- COMMAND [ARG...]\n");
        return 2;
    }
    out = fopen(log, "we");
    if (!out) {
        fprintf(stderr, "exec_notifier: %s: %s\n", log, strerror(errno));
        return 126;
    }
    if (pin) {
        int cpu = sched_getcpu();
        cpu_set_t set;
        CPU_ZERO(&set);
        if (cpu >= 0) {
            CPU_SET(cpu, &set);
            sched_setaffinity(0, sizeof set, &set);
        }
    }
    int channel[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) != 0) return 126;
    pid_t command = fork();
    if (command < 0) return 126;
    if (command == 0) {
        fclose(out);
        close(channel[0]);
        const char *program = find_program(argv[at]);
        int fd = install_filter();
        if (fd < 0 || send_descriptor(channel[1], fd) != 0) {
            fprintf(stderr, "exec_notifier: cannot install the seccomp notification filter: %s\n", strerror(errno));
            _exit(126);
        }
        close(fd);
        close(channel[1]);
        execvp(program, argv + at);
        fprintf(stderr, "exec_notifier: %s: %s\n", argv[at], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    close(channel[1]);
    listener = receive_descriptor(channel[0]);
    close(channel[0]);
    /* The command's process group may be signalled (a timeout): this process stays until its last
     * process has ended, so every line it was given is written. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    set_known(command);
    struct seccomp_notif_sizes sizes;
    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) sizes.seccomp_notif = sizeof(struct seccomp_notif);
    struct seccomp_notif *request = calloc(1, sizes.seccomp_notif > sizeof *request ? sizes.seccomp_notif : sizeof *request);
    while (listener >= 0) {
        struct pollfd ready = {listener, POLLIN, 0};
        if (poll(&ready, 1, 0) == 0) {
            fflush(out);
            if (poll(&ready, 1, -1) < 0) {
                if (errno == EINTR) continue;
                break;
            }
        }
        if (!(ready.revents & POLLIN)) break; /* every process of the command has ended */
        memset(request, 0, sizes.seccomp_notif);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, request) != 0) {
            if (errno == EINTR || errno == ENOENT) continue;
            break;
        }
        int taken = 0, refused = 0;
        if (request->data.nr == __NR_execve) refused = on_exec(request, 0);
        else if (request->data.nr == __NR_execveat) refused = on_exec(request, 1);
        else if (request->data.nr == __NR_exit_group) on_exit_group(request);
        else if (request->data.nr == __NR_connect) taken = on_connect(request);
        if (refused) {
            struct seccomp_notif_resp response = {.id = request->id, .error = -refused};
            ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &response);
        } else if (!taken) {
            struct seccomp_notif_resp response = {.id = request->id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE};
            ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &response);
        }
    }
    fflush(out);
    int status = 0;
    while (waitpid(command, &status, 0) < 0 && errno == EINTR) {
    }
    fclose(out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
