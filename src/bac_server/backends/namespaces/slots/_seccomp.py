"""The seccomp profile every sandbox runs under: an allowlist, stricter than Docker's default.

Anything not listed fails with ``ENOSYS`` (so libc falls back from syscalls it may not use,
e.g. ``clone3`` -> ``clone``). Known-dangerous calls fail with ``EPERM``: kernel attack
surface that namespaces do not cover (io_uring, bpf, perf_event_open, userfaultfd, keyctl),
anything that changes mounts or namespaces, module and kexec loading, ptrace and its
cousins, clock and host-wide settings. ``clone`` is allowed only without namespace flags,
``socket`` only for families below ``AF_ALG`` (no AF_ALG, AF_VSOCK, AF_XDP, ...), and
``personality`` only for the values libc and ``setarch`` use.

Only the native architecture is allowed, so 32-bit compat syscalls are out too.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import platform
from pathlib import Path
from typing import Any

_ALLOWED = """
accept accept4 access alarm arch_prctl bind brk cachestat capget capset chdir chmod chown
clock_getres clock_gettime clock_nanosleep close close_range connect copy_file_range creat
dup dup2 dup3 epoll_create epoll_create1 epoll_ctl epoll_pwait epoll_pwait2 epoll_wait
eventfd eventfd2 execve execveat exit exit_group faccessat faccessat2 fadvise64 fallocate
fchdir fchmod fchmodat fchmodat2 fchown fchownat fcntl fdatasync fgetxattr flistxattr flock
fork fremovexattr fsetxattr fstat fstatfs fsync ftruncate futex futex_requeue futex_wait
futex_waitv futex_wake futimesat get_mempolicy get_robust_list getcpu getcwd getdents
getdents64 getegid geteuid getgid getgroups getitimer getpeername getpgid getpgrp getpid
getppid getpriority getrandom getresgid getresuid getrlimit getrusage getsid getsockname
getsockopt gettid gettimeofday getuid getxattr inotify_add_watch inotify_init inotify_init1
inotify_rm_watch io_cancel io_destroy io_getevents io_pgetevents io_setup io_submit ioctl
ioprio_get ioprio_set kill landlock_add_rule landlock_create_ruleset landlock_restrict_self
lchown lgetxattr link linkat listen listxattr llistxattr lremovexattr lseek lsetxattr lstat
madvise map_shadow_stack mbind membarrier memfd_create mincore mkdir mkdirat mknod mknodat
mlock mlock2 mlockall mmap mprotect mq_getsetattr mq_notify mq_open mq_timedreceive
mq_timedsend mq_unlink mremap mseal msgctl msgget msgrcv msgsnd msync munlock munlockall
munmap nanosleep newfstatat open openat openat2 pause pidfd_open pidfd_send_signal pipe pipe2
pkey_alloc pkey_free pkey_mprotect poll ppoll prctl pread64 preadv preadv2 prlimit64
process_mrelease pselect6 pwrite64 pwritev pwritev2 read readahead readlink readlinkat readv
recvfrom recvmmsg recvmsg remap_file_pages removexattr rename renameat renameat2
restart_syscall rmdir rseq rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo
rt_sigreturn rt_sigsuspend rt_sigtimedwait rt_tgsigqueueinfo sched_get_priority_max
sched_get_priority_min sched_getaffinity sched_getattr sched_getparam sched_getscheduler
sched_rr_get_interval sched_setaffinity sched_setattr sched_setparam sched_setscheduler
sched_yield seccomp select semctl semget semop semtimedop sendfile sendmmsg sendmsg sendto
set_mempolicy set_robust_list set_thread_area set_tid_address setfsgid setfsuid setgid
setgroups setitimer setpgid setpriority setregid setresgid setresuid setreuid setrlimit
setsid setsockopt setuid setxattr shmat shmctl shmdt shmget shutdown sigaltstack signalfd
signalfd4 socketpair splice stat statfs statx symlink symlinkat sync sync_file_range syncfs
sysinfo tee tgkill time timer_create timer_delete timer_getoverrun timer_gettime
timer_settime timerfd_create timerfd_gettime timerfd_settime times tkill truncate umask
uname unlink unlinkat uretprobe utime utimensat utimes vfork vmsplice wait4 waitid write
writev
""".split()

# Denied with EPERM (listed so the intent is explicit and tested, not left to the default).
DENIED = """
acct add_key adjtimex bpf chroot clock_adjtime clock_settime delete_module fanotify_init
finit_module fsconfig fsmount fsopen fspick init_module io_uring_enter io_uring_register
io_uring_setup ioperm iopl kcmp kexec_file_load kexec_load keyctl lookup_dcookie
migrate_pages modify_ldt mount mount_setattr move_mount move_pages name_to_handle_at
nfsservctl open_by_handle_at open_tree perf_event_open pidfd_getfd pivot_root
process_madvise process_vm_readv process_vm_writev ptrace quotactl quotactl_fd reboot
request_key setdomainname sethostname setns settimeofday swapoff swapon syslog umount2
unshare uselib userfaultfd ustat vhangup
""".split()

_NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
_AF_ALG = 38  # first family not allowed: AF_ALG, AF_NFC, AF_VSOCK, AF_KCM, AF_XDP, ...
_PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

_ARCHES = {"x86_64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64"}


def _rule(names: list[str], action: str, *, errno_ret: int | None = None,
          args: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"names": names, "action": action}
    if errno_ret is not None:
        rule["errnoRet"] = errno_ret
    if args:
        rule["args"] = args
    return rule


def seccomp_profile() -> dict[str, Any]:
    """The OCI ``linux.seccomp`` object."""
    machine = platform.machine()
    if machine not in _ARCHES:
        raise RuntimeError(f"no seccomp profile for architecture {machine}")
    rules = [
        _rule(sorted(_ALLOWED), "SCMP_ACT_ALLOW"),
        _rule(sorted(DENIED), "SCMP_ACT_ERRNO", errno_ret=errno.EPERM),
        _rule(["clone"], "SCMP_ACT_ALLOW", args=[
            {"index": 0, "value": _NAMESPACE_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"},
        ]),
        _rule(["clone3"], "SCMP_ACT_ERRNO", errno_ret=errno.ENOSYS),
        _rule(["socket"], "SCMP_ACT_ALLOW", args=[
            {"index": 0, "value": _AF_ALG, "valueTwo": 0, "op": "SCMP_CMP_LT"},
        ]),
    ]
    rules += [
        _rule(["personality"], "SCMP_ACT_ALLOW",
              args=[{"index": 0, "value": value, "valueTwo": 0, "op": "SCMP_CMP_EQ"}])
        for value in _PERSONALITIES
    ]
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": errno.ENOSYS,
        "architectures": [_ARCHES[machine]],
        "syscalls": rules,
    }


# crun compiles the JSON profile with libseccomp at every start (~17 ms here, nearly half
# of its start time). It keeps the compiled program in its state directory and accepts a
# compiled program back through an annotation, so the first sandbox of a process compiles
# it and the rest reuse it. The program is bound to the profile and the runtime binary.
_BPF_ANNOTATION = "run.oci.seccomp_bpf_data"
_compiled: dict[tuple[str, str], str] = {}


def _key(runtime_binary: str, profile: dict[str, Any]) -> tuple[str, str]:
    digest = hashlib.sha256(json.dumps(profile, sort_keys=True).encode()).hexdigest()
    return runtime_binary, digest


def attach_compiled(config: dict[str, Any], runtime_binary: str) -> bool:
    """Add the cached compiled filter to a crun config; False when none is cached yet."""
    cached = _compiled.get(_key(runtime_binary, config["linux"]["seccomp"]))
    if cached is None:
        return False
    config.setdefault("annotations", {})[_BPF_ANNOTATION] = cached
    return True


def remember_compiled(config: dict[str, Any], runtime_binary: str, program: Path) -> None:
    """Cache the program the runtime compiled for ``config`` (if it looks like one)."""
    try:
        raw = program.read_bytes()
    except OSError:
        return
    if raw and len(raw) % 8 == 0:  # a whole number of struct sock_filter
        _compiled[_key(runtime_binary, config["linux"]["seccomp"])] = \
            base64.b64encode(raw).decode()
