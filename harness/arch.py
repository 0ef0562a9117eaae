"""The architectures kernels are built and booted for: x86-64 (every
config) and arm64 (the configs named NAME-arm64: ./bulk bench --arch arm64
and ./bulk callers --arch arm64).  An architecture is a property of a
config: kconfig.py takes from it the make variables and the toolchain,
kbuild.py the image, boot.py QEMU, the console and the init's compiler.

arm64 boots QEMU's virt machine, -cpu max, with the generic timer's
counter at 1 GHz (cntfrq): under -icount shift=0 QEMU's virtual clock
advances 1 ns per instruction, so the counter (CNTVCT, which arm64's
ktime_get_ns() and the init read) counts instructions, one a tick.  At
QEMU 7.2's default of 62.5 MHz a tick is 16 instructions.  The benchmark
module has no TSC there and times with ktime_get_ns(): nanoseconds, which
are instructions at any counter frequency, but only to the counter's
resolution.
"""
import dataclasses

# QEMU's generic timer frequency on arm64: 1 GHz, one tick per ns of
# virtual time, so one per instruction under -icount shift=0.
ARM64_CNTFRQ = 1000000000


@dataclasses.dataclass(frozen=True)
class Arch:
    name: str
    # make ARCH= and the variables that pick the (cross) compiler
    make_vars: tuple[str, ...]
    # CROSS_COMPILE prefix of the toolchain ('' for the host's)
    cross: str
    # kbuild's image target and where it lands in the O= dir
    image: str
    image_path: str
    qemu: str
    # QEMU's machine and CPU arguments (exact and smp modes alike)
    machine: tuple[str, ...]
    console: str
    # the fragment that stands for configs/common.config
    common: str
    # config names of this architecture end in it
    suffix: str
    # Debian packages of the toolchain and QEMU
    packages: tuple[str, ...]

    def tool(self, name: str) -> str:
        """gcc, ld, ... of this architecture's toolchain."""
        return self.cross + name

    def config(self, name: str) -> str:
        """The config of this architecture for x86-64's @name."""
        return name + self.suffix


X86_64 = Arch("x86_64", ("ARCH=x86_64", "CC=ccache gcc"), "", "bzImage",
              "arch/x86/boot/bzImage", "qemu-system-x86_64", ("-cpu", "max"),
              "ttyS0", "common", "", ("qemu-system-x86",))
ARM64 = Arch("arm64", ("ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-",
                       "CC=ccache aarch64-linux-gnu-gcc"),
             "aarch64-linux-gnu-", "Image", "arch/arm64/boot/Image",
             "qemu-system-aarch64",
             # pauth-impdef: QEMU's own hash for pointer authentication, far
             # faster to emulate than QARMA (the kernel is built without
             # pointer authentication: no instruction count depends on it).
             ("-M", "virt", "-cpu",
              "max,pauth-impdef=on,cntfrq=%d" % ARM64_CNTFRQ),
             "ttyAMA0", "common-arm64", "-arm64",
             ("qemu-system-arm", "gcc-aarch64-linux-gnu",
              "libc6-dev-arm64-cross"))
ARCHES = {a.name: a for a in (X86_64, ARM64)}
# The configs that have an arm64 counterpart (NAME-arm64): the benchmark's
# and the callers'.
ARM64_CONFIGS = ("slub", "slab", "slob", "slub-callers", "slub-callers-count")


def of_config(config: str) -> Arch:
    """The architecture of a config name: arm64 for NAME-arm64."""
    return ARM64 if config.endswith(ARM64.suffix) else X86_64


def get(name: str) -> Arch:
    """An architecture by name (x86_64, arm64); KeyError otherwise."""
    return ARCHES[name]
