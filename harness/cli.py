"""Command line: one sub-command per pipeline stage, plus 'test' and 'bench'."""
import argparse
import os
import subprocess
import sys

from common import StageError

APT_PACKAGES = [
    "qemu-system-x86", "linux-source-6.1", "build-essential", "flex", "bison",
    "bc", "libelf-dev", "libssl-dev", "cpio", "ccache", "python3", "git",
    "xz-utils", "kmod", "gnuplot-nox", "rsync",
    # checkpatch.pl's SPDX check runs scripts/spdxcheck.py with these
    "python3-ply", "python3-git",
]


def setup(_args):
    """Install what every stage needs (Debian 12, as root or with sudo)."""
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    missing = subprocess.run(
        ["dpkg-query", "-W", "-f=${db:Status-Abbrev} ${Package}\n"] + APT_PACKAGES,
        capture_output=True, text=True).stdout
    have = {l.split()[-1] for l in missing.splitlines() if l.startswith("ii")}
    need = [p for p in APT_PACKAGES if p not in have]
    if not need:
        print("setup: all packages installed")
        return 0
    print("setup: apt-get install %s" % " ".join(need), flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (sudo + ["apt-get", "update", "-q"],
                sudo + ["apt-get", "install", "-y", "-q"] + need):
        p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL)
        if p.returncode != 0:
            raise StageError("setup", "failed: %s" % " ".join(cmd))
    return 0


def main(argv):
    ap = argparse.ArgumentParser(prog="./bulk", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    sub.add_parser("setup", help="install the Debian packages the harness needs")
    p = sub.add_parser("base", help="unpack linux-source-6.1 into build/linux, tag 'base'")
    p.add_argument("--force", action="store_true", help="discard unexported work")
    p.add_argument("--record", action="store_true",
                   help="write the installed package into patches/BASE")
    p = sub.add_parser("tree", help="build/linux = base + git am patches/")
    p.add_argument("--force", action="store_true", help="discard unexported work")
    sub.add_parser("export", help="write build/linux base..HEAD to patches/")
    p = sub.add_parser("config", help="write and verify a kernel .config")
    p.add_argument("configs", nargs="+", help="config names (./bulk config --list)")
    p.add_argument("--tree", default="linux", help="source tree under build/ (default linux)")
    p = sub.add_parser("build", help="configure and build kernels with kbuild")
    p.add_argument("configs", nargs="+")
    p.add_argument("--tree", default="linux")
    p = sub.add_parser("boot", help="boot a built kernel under QEMU")
    p.add_argument("config")
    p.add_argument("--tree", default="linux")
    p.add_argument("--mode", choices=["exact", "smp"], default="exact")
    p.add_argument("--load", default="", help="comma-separated module names to load")
    p.add_argument("--append", default="", help="extra kernel command line")
    p.add_argument("--timeout", type=int, default=600)
    p = sub.add_parser("kunit", help="run the KUnit suites of a built kernel")
    p.add_argument("config")
    p.add_argument("--tree", default="linux")
    p.add_argument("--mode", choices=["exact", "smp"], default="exact")
    p.add_argument("--append", default="")
    sub.add_parser("kunit-each", help="the contract suite at every patch "
                   "(slub exact/smp, slub-debug): results/kunit-each-patch.md")
    p = sub.add_parser("test", help="the test command (README); CI runs it")
    p.add_argument("--only", default="", help="comma-separated step groups")
    p = sub.add_parser("bench", help="the main command: base vs series benchmark")
    p.add_argument("--alloc", default="slub", help="slub,slab,slob")
    p.add_argument("--tests", default="abcde")
    p.add_argument("--quick", action="store_true")
    p = sub.add_parser("report", help="re-render results/ from the last bench logs")
    p.add_argument("--alloc", default="slub")
    p.add_argument("--tests", default="abcde")
    p.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)

    try:
        if args.cmd == "setup":
            return setup(args)
        if args.cmd == "base":
            import base
            if args.record:
                base.record()
            else:
                base.create(force=args.force)
            return 0
        if args.cmd == "tree":
            import tree
            tree.create(force=args.force)
            return 0
        if args.cmd == "export":
            import tree
            tree.export()
            return 0
        if args.cmd == "config":
            import kconfig
            for c in args.configs:
                kconfig.configure(c, args.tree)
            return 0
        if args.cmd == "build":
            import kbuild
            for c in args.configs:
                kbuild.build(c, args.tree)
            return 0
        if args.cmd == "boot":
            import boot
            r = boot.boot(args.config, args.tree, args.mode,
                          [m for m in args.load.split(",") if m],
                          args.append, args.timeout)
            print(r["log"])
            return 0
        if args.cmd == "kunit":
            import kunit
            r = kunit.run(args.config, args.tree, args.mode, args.append)
            return 0 if r["ok"] else 1
        if args.cmd == "kunit-each":
            import kunit
            return 1 if kunit.each_patch() else 0
        if args.cmd == "test":
            import testcmd
            return testcmd.main(args)
        if args.cmd == "bench":
            import bench
            return bench.main(args)
        if args.cmd == "report":
            import bench
            return bench.report_main(args)
    except StageError as e:
        print("FAILED %s" % e, file=sys.stderr)
        return 1
    return 2
