"""Boot stage: QEMU (TCG, -cpu max) with a small initramfs built from
initramfs/init.c by the kernel's own usr/gen_init_cpio.

Modes:
  exact  -icount shift=0,sleep=off -smp 1: the guest TSC counts retired
         instructions and runs repeat bit for bit.
  smp    -smp 2, multi-threaded TCG, no icount: for concurrency; timings noise.
  smp4   the same with four CPUs (the stress runs).

The kernel booted is the one its stamp says was built from the tree as it
is now (kbuild.check_stamp).  The console log is saved under build/logs/;
any kernel splat in it fails the boot and is quoted, and the log is run
through the kernel's scripts/decode_stacktrace.sh.  --shell adds a static
busybox and gives its shell on the console once the modules are loaded;
--gdb waits for gdb on QEMU's gdbstub (tcp::1234).

A config's architecture (arch.of_config: NAME-arm64 is arm64) picks QEMU
(qemu-system-aarch64 -M virt for arm64), the image, the console and the
init's compiler (a static aarch64-linux-gnu-gcc build there).
"""
import dataclasses
import json
import os
import re
import subprocess
from typing import Sequence

import arch
import kbuild
import kconfig
from common import (BUILD, REPO, Progress, StageError, log_path, need_tools, rel,
                    say, watch)

INIT_SRC = os.path.join(REPO, "initramfs", "init.c")
INIT_BIN = os.path.join(BUILD, "initramfs", "init")
BUSYBOX = "/bin/busybox"
EXIT_PORT = "0xf4"
GDB_PORT = 1234
# Kernel splats that fail a boot (checked per console line): warnings,
# BUG()s and oopses, x86 faults (die()'s "divide error: 0000 [#1]" and the
# like), sanitizer and lockdep reports, slub_debug's and DEBUG_SLAB's
# object reports, RCU stalls, soft lockups, hung tasks and list corruption
# (CONFIG_DEBUG_LIST, or a BUG on the way to it).
SPLAT_RE = re.compile(
    r"(WARNING:|BUG:|\bOops\b|KASAN:|general protection|Kernel panic|"
    r": [0-9a-f]{4} \[#\d+\]|"
    r"^BUG [\w.:-]+ \(|UBSAN:|possible circular locking|"
    r"inconsistent lock state|INFO: task .* blocked|"
    r"[Kk]ernel BUG at |invalid opcode: |rcu: INFO: |self-detected stall|"
    r"detected stalls on CPUs|soft lockup|hung_task: |"
    r"hung_task_timeout_secs\" disables|list_add corruption|"
    r"list_del corruption|Slab corruption|slab error in )")
TIMESTAMP_RE = re.compile(r"^\[\s*\d+\.\d+\] ")
MODES = {
    # A fixed RTC on the virtual clock: nothing in the boot depends on the
    # host's time, so exact runs repeat bit for bit.
    "exact": ["-smp", "1", "-icount", "shift=0,sleep=off",
              "-rtc", "base=2000-01-01,clock=vm"],
    # Two sockets: SeaBIOS's MP table (this kernel has no ACPI) lists one
    # CPU per socket, so "-smp 2" alone would boot a single CPU.
    "smp": ["-smp", "2,sockets=2,cores=1,threads=1"],
    # The stress runs' second CPU count (more vCPUs than the host's cores
    # is fine for concurrency).
    "smp4": ["-smp", "4,sockets=4,cores=1,threads=1"],
}


def mode_cpus(mode: str) -> int:
    """The vCPUs of a mode, as its -smp argument gives them."""
    args = MODES[mode]
    return int(args[args.index("-smp") + 1].split(",")[0])


# A KUnit case that must provoke a report (slab_bulk_kasan_double_free,
# slab_bulk_debug_slab_redzone) prints these lines around the call; the case
# itself checks that exactly one report came.  Between them, and only when
# both are there, the report's first line of the announced kind is no splat;
# anything else still is.
EXPECT_BEGIN_RE = re.compile(
    r"^slab_bulk: expected (KASAN|SLAB) report: ([\w-]+) follows$")
EXPECT_END_RE = re.compile(r"^slab_bulk: expected (KASAN|SLAB) report: end$")
# DEBUG_SLAB's report of a clobbered red zone (mm/slab.c verify_redzone_free).
SLAB_REDZONE_RE = re.compile(
    r"^slab error in verify_redzone_free\(\): cache `[^']+': "
    r"memory outside object was overwritten$")


def _expected(tool: str, kind: str, body: str) -> bool:
    """Whether @body is the report line announced as @tool's @kind."""
    if tool == "KASAN":
        return body.startswith("BUG: KASAN: %s in " % kind)
    return kind == "redzone" and bool(SLAB_REDZONE_RE.match(body))


def splats(text: str) -> list[str]:
    """Lines of a console log that show a kernel problem."""
    out: list[str] = []
    pending: list[str] = []
    expect = None
    for line in text.splitlines():
        body = TIMESTAMP_RE.sub("", line).rstrip()
        begin = EXPECT_BEGIN_RE.match(body)
        if begin:
            out.extend(pending)
            pending, expect = [], begin.groups()
            continue
        end = EXPECT_END_RE.match(body)
        if expect and end and end.group(1) == expect[0]:
            pending, expect = [], None
            continue
        if SPLAT_RE.search(body):
            if expect and _expected(expect[0], expect[1], body):
                pending.append(line.strip())
            else:
                out.append(line.strip())
    # An announced report without its end line is not excused.
    return out + pending


# The init's last words before its status: the kernel's taint flags.
TAINT_RE = re.compile(r"^harness: tainted=(\d+)$", re.M)
# kernel/panic.c's taint_flags, bit by bit: the letters a splat prints.
TAINT_LETTERS = "PFSRMBUDAWCIOELKXTN"
# What a boot may be tainted with: N, a KUnit module was loaded; B, a
# KASAN, KFENCE or slab debugging report (bad page), which some cases
# provoke on purpose and which fails the boot through its console line
# otherwise.  Any other
# flag (a warning, an oops, a soft lockup, a forced module, ...) fails it,
# whether or not a line of the console says why.
TAINT_OK = (1 << TAINT_LETTERS.index("N")) | (1 << TAINT_LETTERS.index("B"))


def taint_letters(mask: int) -> str:
    """The letters of @mask's flags; '?' for a bit this table lacks."""
    return "".join(c for i, c in enumerate(TAINT_LETTERS) if mask >> i & 1) \
        + ("?" if mask >> len(TAINT_LETTERS) else "") or "none"


def taint_problem(text: str) -> str | None:
    """Why the taint flags the init printed fail the boot (None when they
    do not, or when it printed none: a boot that ended before its init
    did is failed by its status)."""
    m = TAINT_RE.search(text)
    if not m:
        return None
    bad = int(m.group(1)) & ~TAINT_OK
    if not bad:
        return None
    return "kernel tainted %s (%#x; flags beyond %s)" % (
        taint_letters(bad), bad, taint_letters(TAINT_OK))


def exit_status(rc: int) -> int | None:
    """Map QEMU's exit code to the init's status (None: no status sent)."""
    if rc > 0 and rc & 1:
        return rc >> 1
    return None


def logged_status(text: str) -> int | None:
    """The status the init printed ('harness: status=N'), or None."""
    m = re.search(r"^harness: status=(\d+)", text, re.M)
    return int(m.group(1)) if m else None


def init_binary(shell: bool, a: arch.Arch = arch.X86_64) -> str:
    """Where the init of @a is built (x86-64's at INIT_BIN)."""
    binary = INIT_BIN + "-shell" if shell else INIT_BIN
    return binary + ("" if a == arch.X86_64 else "-" + a.name)


def build_init(shell: bool, a: arch.Arch = arch.X86_64) -> str:
    """The static init; for --shell, built with -DHARNESS_SHELL (the init
    of every other boot stays the same program)."""
    gcc = a.tool("gcc")
    need_tools("boot", [gcc])
    binary = init_binary(shell, a)
    os.makedirs(os.path.dirname(binary), exist_ok=True)
    if (not os.path.exists(binary)
            or os.path.getmtime(binary) < os.path.getmtime(INIT_SRC)):
        p = subprocess.run([gcc, "-static", "-Os", "-Wall", "-Werror"]
                           + (["-DHARNESS_SHELL"] if shell else [])
                           + ["-o", binary, INIT_SRC], capture_output=True, text=True)
        if p.returncode != 0:
            raise StageError("boot", "compiling initramfs/init.c failed "
                             "(static libc from libc6-dev needed; for "
                             "arm64 libc6-dev-arm64-cross)",
                             detail=p.stderr)
    return binary


def built_modules(out: str) -> dict[str, str]:
    """{name: path of name.ko} of a kbuild output dir, from modules.order."""
    order = os.path.join(out, "modules.order")
    if not os.path.exists(order):
        return {}
    known = {}
    with open(order) as f:
        for line in f:
            rel = line.strip()
            if rel:
                rel = rel[:-2] + ".ko" if rel.endswith(".o") else rel
                known[os.path.basename(rel)[:-3]] = os.path.join(out, rel)
    return known


def find_modules(out: str, names: Sequence[str]) -> list[str]:
    """Paths of <name>.ko in a kbuild output dir."""
    known = built_modules(out)
    for n in names:
        if n not in known or not os.path.exists(known[n]):
            raise StageError("boot", "module %s not built in %s (is its "
                             "Kconfig symbol =m in this config?)" % (n, out))
    return [known[n] for n in names]


def make_initramfs(out: str, modules: Sequence[str], tag: str,
                   shell: bool = False, a: arch.Arch = arch.X86_64) -> str:
    gen = os.path.join(out, "usr", "gen_init_cpio")
    if not os.path.exists(gen):
        raise StageError("boot", "%s missing: build the kernel first" % gen)
    init = build_init(shell, a)
    lines = ["dir /dev 0755 0 0", "nod /dev/console 0600 0 0 c 5 1",
             "dir /proc 0755 0 0", "dir /sys 0755 0 0", "dir /lib 0755 0 0",
             "dir /lib/modules 0755 0 0", "file /init %s 0755 0 0" % init]
    for name, path in zip(modules, find_modules(out, modules)):
        lines.append("file /lib/modules/%s.ko %s 0644 0 0" % (name, path))
    if shell:
        if not os.path.exists(BUSYBOX):
            raise StageError("boot", "--shell needs %s: run ./bulk setup "
                             "(busybox-static)" % BUSYBOX)
        lines += ["dir /bin 0755 0 0", "file /bin/busybox %s 0755 0 0" % BUSYBOX,
                  "slink /bin/sh busybox 0777 0 0"]
    spec = os.path.join(out, "harness-%s.list" % tag)
    with open(spec, "w") as f:
        f.write("\n".join(lines) + "\n")
    cpio = os.path.join(out, "harness-%s.cpio" % tag)
    with open(cpio, "wb") as f:
        # A fixed timestamp: gen_init_cpio stamps directories with the
        # current time, and a different archive is a different boot.
        p = subprocess.run([gen, "-t", "946684800", spec], stdout=f,
                           stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise StageError("boot", "gen_init_cpio failed", detail=p.stderr.decode())
    return cpio


# The guest's RDRAND/RDSEED draw from QEMU's generator, seeded with a
# constant so that exact-mode runs still repeat bit for bit.
QEMU_SEED = "1"
# As Debian's CONFIG_RANDOM_TRUST_CPU=y: the CRNG is ready at boot. Without
# it, it never becomes ready in a quiet guest, and every get_random_u32()
# (one per new slab, for the freelist shuffle) costs about 11000
# instructions instead of a few tens: slab-allocating tests measured the
# RNG, not the allocator.
RNG_CMDLINE = "random.trust_cpu=on"


def kernel_cmdline(load: Sequence[str] = (), append: str = "",
                   console: str = arch.X86_64.console) -> str:
    """The guest kernel's command line: console, RNG, modules to load."""
    return ("console=%s panic=-1 nokaslr %s harness.load=%s %s" % (
        console, RNG_CMDLINE, ",".join(load), append)).strip()


# The network runs' NIC: virtio-net on a hub port whose hub has one other
# port, with no peer.  The hub forwards every frame there, where QEMU drops
# it (a hub with no other port would refuse the frames, and the guest's
# TX queue would stall); the run needs no network on the host.
NIC = ["-netdev", "hubport,id=net0,hubid=0",
       "-netdev", "hubport,id=sink,hubid=0",
       "-device", "virtio-net-pci,netdev=net0,mac=52:54:00:12:34:56"]


def has_nic(config: str) -> bool:
    """Kernels built with configs/net.config boot with the NIC."""
    return "net" in kconfig.CONFIG_SETS.get(config, [])


def qemu_cmd(kernel: str, initrd: str, mode: str, cmdline: str,
             mem: str = "1G", nic: bool = False,
             a: arch.Arch = arch.X86_64) -> list[str]:
    """x86-64's init ends QEMU through isa-debug-exit; arm64's reboots,
    which -no-reboot makes an exit (status from the console)."""
    exit_dev = (["-device", "isa-debug-exit,iobase=%s,iosize=0x04" % EXIT_PORT]
                if a == arch.X86_64 else [])
    return ([a.qemu] + list(a.machine) + [
        "-seed", QEMU_SEED, "-m", mem,
        "-display", "none", "-serial", "stdio", "-monitor", "none",
        "-no-reboot"] + exit_dev +
        ["-kernel", kernel, "-initrd", initrd, "-append", cmdline]
        + MODES[mode] + (NIC if nic else []))


def log_file(tree: str, config: str, tag: str) -> str:
    """The console log of a boot (what the benchmark report reads)."""
    return log_path("boot-%s-%s-%s.log" % (tree, config, tag))


@dataclasses.dataclass
class BootResult:
    config: str
    tree: str
    mode: str
    load: list[str]
    append: str
    log: str
    qemu_rc: int | None
    status: int | None
    seconds: int
    splats: list[str]
    # The console log run through scripts/decode_stacktrace.sh, when it
    # shows a splat.
    decoded: str | None
    cmd: list[str]
    problems: list[str]


def problems_of(rc: int | None, status: int | None, found: list[str],
                decoded: str | None, timeout: float | None,
                decode_error: str | None = None,
                taint: str | None = None) -> list[str]:
    """Why a boot failed ([] when it did not)."""
    problems = []
    if rc is None:
        problems.append("timed out after %ds" % (timeout or 0))
    elif status is None:
        problems.append("QEMU exited %d and the init printed no status "
                        "(kernel panic?)" % rc)
    elif status != 0:
        problems.append("init reported status %d (see 'harness:' lines)" % status)
    if found:
        problems.append("%d kernel splat(s) in the console (decoded: %s)"
                        % (len(found), rel(decoded or "")))
    if decode_error:
        problems.append(decode_error)
    if taint:
        problems.append(taint)
    return problems


def decode(out: str, src: str, log: str) -> tuple[str, str | None]:
    """log run through scripts/decode_stacktrace.sh (symbols to lines):
    the decoded log, and why decoding failed (None when it did not)."""
    decoded = log[:-4] + ".decoded.log"
    script = os.path.join(src, "scripts", "decode_stacktrace.sh")
    with open(log, "rb") as inp, open(decoded, "wb") as f:
        try:
            rc = subprocess.run([script, os.path.join(out, "vmlinux"), src, out],
                                stdin=inp, stdout=f, stderr=subprocess.STDOUT,
                                cwd=src).returncode
        except OSError as e:
            return decoded, "%s could not run: %s" % (rel(script), e)
    if rc != 0:
        return decoded, "%s exited %d: the decoded log is incomplete (%s)" % (
            os.path.basename(script), rc, rel(decoded))
    return decoded, None


def interactive_problem(rc: int) -> str | None:
    """Why an interactive QEMU run failed, from its exit code (None: it
    did not).  0: QEMU ended (Ctrl-A x, or the guest powered off);
    odd: the init sent its status, 2 * status + 1; else QEMU failed or was
    killed."""
    if rc == 0:
        return None
    status = exit_status(rc)
    if status is None:
        return "QEMU exited %d" % rc
    return "init reported status %d" % status if status else None


def interactive(cmd: list[str], gdb: bool, out: str) -> None:
    """--shell and --gdb: QEMU on this terminal, console and monitor
    multiplexed on stdio."""
    i = cmd.index("-serial")
    cmd = cmd[:i] + ["-serial", "mon:stdio"] + cmd[i + 4:]
    if gdb:
        cmd += ["-gdb", "tcp::%d" % GDB_PORT, "-S"]
        say("boot: QEMU waits for gdb: gdb %s -ex 'target remote :%d'" % (
            rel(os.path.join(out, "vmlinux")), GDB_PORT))
    say("boot: console on this terminal; Ctrl-A x ends QEMU")
    problem = interactive_problem(subprocess.run(cmd).returncode)
    if problem:
        raise StageError("boot", "%s: %s" % ("--gdb" if gdb else "--shell", problem))


def boot(config: str, tree: str = "linux", mode: str = "exact",
         load: Sequence[str] = (), append: str = "",
         timeout: float | None = 600, tag: str | None = None,
         allow_fail: bool = False, shell: bool = False,
         gdb: bool = False,
         qemu_extra: Sequence[str] = (),
         mem: str = "1G") -> BootResult | None:
    """Boot the kernel of build/o/<tree>-<config>; returns its result (also
    saved as JSON beside the log), or None after an interactive boot.
    @qemu_extra: more QEMU arguments (./bulk profile's plugin); @mem: the
    guest's memory (QEMU's -m)."""
    if mode not in MODES:
        raise StageError("boot", "unknown mode '%s' (%s)" % (
            mode, ", ".join(MODES)))
    a = arch.of_config(config)
    if shell and a != arch.X86_64:
        raise StageError("boot", "--shell packs the host's busybox: x86-64 "
                         "kernels only")
    need_tools("boot", [a.qemu])
    out = kbuild.check_stamp(config, tree, "boot")
    src = kconfig.tree(tree).src
    kernel = os.path.join(out, a.image_path)
    tag = tag or "%s-%s" % (mode, "+".join(load) or "smoke")
    cpio = make_initramfs(out, load, tag, shell, a)
    cmd = qemu_cmd(kernel, cpio, mode, kernel_cmdline(load, append, a.console),
                   mem, nic=has_nic(config), a=a) + list(qemu_extra)
    if shell or gdb:
        interactive(cmd, gdb, out)
        return None
    log = log_file(tree, config, tag)
    say("boot %s-%s %s: %s" % (tree, config, tag, rel(log)))
    progress = Progress("boot %s-%s %s" % (tree, config, tag),
                        lambda line: bool(line.strip()))
    rc = watch(cmd, log, timeout, progress)
    with open(log, errors="replace") as f:
        text = f.read()
    status = exit_status(rc) if rc is not None else None
    if status is None:
        status = logged_status(text)
    found = splats(text)
    decoded, decode_error = decode(out, src, log) if found else (None, None)
    res = BootResult(config, tree, mode, list(load), append, log, rc, status,
                     progress.elapsed(), found, decoded, cmd,
                     problems_of(rc, status, found, decoded, timeout,
                                 decode_error, taint_problem(text)))
    with open(log[:-4] + ".json", "w") as f:
        json.dump(dataclasses.asdict(res), f, indent=1)
    if res.problems and not allow_fail:
        raise StageError("boot", "%s-%s %s: %s" % (tree, config, tag,
                                                   "; ".join(res.problems)),
                         log, "\n".join(found[:10]))
    return res
