"""Boot stage: QEMU (TCG, -cpu max) with a small initramfs built from
initramfs/init.c by the kernel's own usr/gen_init_cpio.

Modes:
  exact  -icount shift=0,sleep=off -smp 1: the guest TSC counts retired
         instructions and runs repeat bit for bit.
  smp    -smp 2, multi-threaded TCG, no icount: for concurrency; timings noise.

The console log is saved under build/logs/; any kernel splat in it fails the
boot and is quoted.
"""
import json
import os
import re
import subprocess
import time

import kconfig
from common import BUILD, REPO, StageError, info, log_path, need_tools

INIT_SRC = os.path.join(REPO, "initramfs", "init.c")
INIT_BIN = os.path.join(BUILD, "initramfs", "init")
EXIT_PORT = "0xf4"
# Kernel splats that fail a boot (checked per console line).
SPLAT_RE = re.compile(
    r"(WARNING:|BUG:|\bOops\b|KASAN:|general protection|Kernel panic|"
    r"^BUG [\w.:-]+ \(|UBSAN:|possible circular locking|"
    r"inconsistent lock state|INFO: task .* blocked)")
TIMESTAMP_RE = re.compile(r"^\[\s*\d+\.\d+\] ")
MODES = {
    # A fixed RTC on the virtual clock: nothing in the boot depends on the
    # host's time, so exact runs repeat bit for bit.
    "exact": ["-smp", "1", "-icount", "shift=0,sleep=off",
              "-rtc", "base=2000-01-01,clock=vm"],
    # Two sockets: SeaBIOS's MP table (this kernel has no ACPI) lists one
    # CPU per socket, so "-smp 2" alone would boot a single CPU.
    "smp": ["-smp", "2,sockets=2,cores=1,threads=1"],
}


# A KUnit case that must provoke a KASAN report (slab_bulk_kasan_double_free)
# prints these lines around the call; the case itself checks that exactly one
# report came.  Between them, and only when both are there, the report's
# "BUG: KASAN: <kind>" line of the announced kind is no splat; anything else
# still is.
EXPECT_BEGIN_RE = re.compile(r"^slab_bulk: expected KASAN report: ([\w-]+) follows$")
EXPECT_END = "slab_bulk: expected KASAN report: end"


def splats(text):
    """Lines of a console log that show a kernel problem."""
    out, pending, kind = [], [], None
    for line in text.splitlines():
        body = TIMESTAMP_RE.sub("", line).rstrip()
        begin = EXPECT_BEGIN_RE.match(body)
        if begin:
            out.extend(pending)
            pending, kind = [], begin.group(1)
            continue
        if kind and body == EXPECT_END:
            pending, kind = [], None
            continue
        if SPLAT_RE.search(body):
            if kind and body.startswith("BUG: KASAN: %s in " % kind):
                pending.append(line.strip())
            else:
                out.append(line.strip())
    # An announced report without its end line is not excused.
    return out + pending


def exit_status(rc):
    """Map QEMU's exit code to the init's status (None: no status sent)."""
    if rc > 0 and rc & 1:
        return rc >> 1
    return None


def logged_status(text):
    """The status the init printed ('harness: status=N'), or None."""
    m = re.search(r"^harness: status=(\d+)", text, re.M)
    return int(m.group(1)) if m else None


def build_init():
    need_tools("boot", ["gcc"])
    os.makedirs(os.path.dirname(INIT_BIN), exist_ok=True)
    if (not os.path.exists(INIT_BIN)
            or os.path.getmtime(INIT_BIN) < os.path.getmtime(INIT_SRC)):
        p = subprocess.run(["gcc", "-static", "-Os", "-Wall", "-Werror", "-o",
                            INIT_BIN, INIT_SRC], capture_output=True, text=True)
        if p.returncode != 0:
            raise StageError("boot", "compiling initramfs/init.c failed "
                             "(static libc from libc6-dev needed):\n" + p.stderr)
    return INIT_BIN


def find_modules(out, names):
    """Paths of <name>.ko in a kbuild output dir, via modules.order."""
    order = os.path.join(out, "modules.order")
    known = {}
    if os.path.exists(order):
        for line in open(order):
            rel = line.strip()
            if rel.endswith(".o"):
                rel = rel[:-2] + ".ko"
            known[os.path.basename(rel)[:-3]] = os.path.join(out, rel)
    paths = []
    for n in names:
        if n not in known or not os.path.exists(known[n]):
            raise StageError("boot", "module %s not built in %s (is its "
                             "Kconfig symbol =m in this config?)" % (n, out))
        paths.append(known[n])
    return paths


def built_modules(out):
    order = os.path.join(out, "modules.order")
    if not os.path.exists(order):
        return []
    return [os.path.basename(l.strip())[:-3] for l in open(order) if l.strip()]


def make_initramfs(out, modules, tag):
    gen = os.path.join(out, "usr", "gen_init_cpio")
    if not os.path.exists(gen):
        raise StageError("boot", "%s missing: build the kernel first" % gen)
    init = build_init()
    lines = ["dir /dev 0755 0 0", "nod /dev/console 0600 0 0 c 5 1",
             "dir /proc 0755 0 0", "dir /sys 0755 0 0", "dir /lib 0755 0 0",
             "dir /lib/modules 0755 0 0", "file /init %s 0755 0 0" % init]
    for name, path in zip(modules, find_modules(out, modules)):
        lines.append("file /lib/modules/%s.ko %s 0644 0 0" % (name, path))
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
        raise StageError("boot", "gen_init_cpio failed: %s" % p.stderr.decode())
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


def kernel_cmdline(load=(), append=""):
    """The guest kernel's command line: console, RNG, modules to load."""
    return ("console=ttyS0 panic=-1 nokaslr %s harness.load=%s %s" % (
        RNG_CMDLINE, ",".join(load), append)).strip()


def qemu_cmd(kernel, initrd, mode, cmdline, mem="1G"):
    return (["qemu-system-x86_64", "-cpu", "max", "-seed", QEMU_SEED, "-m", mem,
             "-display", "none", "-serial", "stdio", "-monitor", "none",
             "-no-reboot", "-device",
             "isa-debug-exit,iobase=%s,iosize=0x04" % EXIT_PORT,
             "-kernel", kernel, "-initrd", initrd, "-append", cmdline]
            + MODES[mode])


def boot(config, tree="linux", mode="exact", load=(), append="", timeout=600,
         tag=None, allow_fail=False):
    """Boot build/o/<tree>-<config>; returns a dict (also saved as JSON)."""
    if mode not in MODES:
        raise StageError("boot", "unknown mode '%s' (exact, smp)" % mode)
    need_tools("boot", ["qemu-system-x86_64"])
    out = kconfig.out_dir(config, tree)
    kernel = os.path.join(out, "arch", "x86", "boot", "bzImage")
    if not os.path.exists(kernel):
        raise StageError("boot", "%s missing: run ./bulk build %s --tree %s"
                         % (kernel, config, tree))
    tag = tag or "%s-%s" % (mode, "+".join(load) or "smoke")
    cpio = make_initramfs(out, list(load), tag)
    cmdline = kernel_cmdline(load, append)
    log = log_path("boot-%s-%s-%s.log" % (tree, config, tag))
    cmd = qemu_cmd(kernel, cpio, mode, cmdline)
    info("boot %s-%s %s: %s" % (tree, config, tag, os.path.relpath(log, os.getcwd())))
    start = time.time()
    with open(log, "w") as f:
        try:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = None
    with open(log, errors="replace") as f:
        text = f.read()
    status = exit_status(rc) if rc is not None else None
    if status is None:
        status = logged_status(text)
    res = {"config": config, "tree": tree, "mode": mode, "load": list(load),
           "append": append, "log": log, "qemu_rc": rc, "status": status,
           "seconds": round(time.time() - start, 1), "splats": splats(text),
           "cmd": cmd}
    with open(log[:-4] + ".json", "w") as f:
        json.dump(res, f, indent=1)
    problems = []
    if rc is None:
        problems.append("timed out after %ds" % timeout)
    elif res["status"] is None:
        problems.append("QEMU exited %d and the init printed no status "
                        "(kernel panic?)" % rc)
    elif res["status"] != 0:
        problems.append("init reported status %d (see 'harness:' lines)"
                        % res["status"])
    if res["splats"]:
        problems.append("kernel splat(s) in the console:\n    " +
                        "\n    ".join(res["splats"][:10]))
    res["problems"] = problems
    if problems and not allow_fail:
        raise StageError("boot", "%s-%s %s: %s" % (tree, config, tag,
                                                   "; ".join(problems)), log)
    return res
