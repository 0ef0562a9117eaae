"""./bulk stack: the stack frames of the slab bulk paths, base vs series.

What instruction counts cannot see: a bulk call that keeps an array of
slots on its stack costs stack, and a frame that grew on a path a network
driver calls in softirq context is a cost even when it is never slower.
This command builds, for base and series, only the objects the series
changes (the allocator's mm/slub.o, mm/slab.o or mm/slob.o,
mm/slab_common.o and net/core/skbuff.o) for each architecture variant in
VARIANTS and each allocator, and reads every function's frame from the
disassembly.

The trees are the base tag and the series branch of build/linux, unpacked
with git archive into build/stack/base and build/stack/series (unpacked
again when the branch's sources change); each (variant, allocator) is its
own O= dir directly inside the tree (so that kbuild's srctree is '..' in
both trees and ccache shares what the two have in common).  A config is
the harness's fragments for the allocator (kconfig.CONFIG_SETS: e.g. slub
= common + hardening + slub + bench) plus the variant's lines, merged by
scripts/kconfig/merge_config.sh as ./bulk config merges them; fragment
lines for symbols another architecture lacks are ignored there.

Frames.  6.1's scripts/checkstack.pl adds up every instruction that looks
like a stack adjustment in a function: on x86 its regex matches 'add' as
well as 'sub' of an immediate to %rsp/%esp, so a function with a
'sub $0x38,%rsp' prologue and three 'add $0x38,%rsp' epilogues (one per
return path) is reported as 224 bytes, and on i386 every 'add $N,%esp'
that pops a call's stack arguments counts too; a 128-byte frame, which
gcc writes 'add $0xffffffffffffff80,%rsp' (imm8 -128), sums to a
negative figure and is not listed at all; and it leaves out the pushes.
Its figure is kept in the record (the checkstack.pl column) but the frame
this command reports is read from objdump:

 - x86 (64 and 32 bit): sub is the prologue's 'sub $N,%rsp' or 'add
   $-N,%rsp' (the first one from the first callee-saved register push,
   before the first jump or call); saved registers are the callee-saved
   registers (rbx rbp r12-r15; ebx ebp esi edi) the function pushes,
   frame pointer included, each counted once.  frame = sub + saved *
   word (the return address the call pushed is not counted).
 - arm64: sub is the prologue's pre-indexed store ('stp x29, x30, [sp,
   #-N]!') plus its 'sub sp, sp, #N', from the first one up to the first
   branch; the registers are saved inside that space, so frame = sub.
   Saved registers are x19-x30 stored to [sp, ...] anywhere in the
   function (gcc's separate shrink-wrapping saves some of them only on the
   paths that use them), each counted once.

Those are the function's own frame, not the deepest stack of a call
chain, and leave out transient pushes of call arguments on i386.

Which functions: the bulk paths' own (BULK_PATH), every function of the
objects' disassembly whose source function the series adds or changes
(its text in mm/slub.c, mm/slab.c, mm/slob.c, mm/slab_common.c,
net/core/skbuff.c, mm/slab.h, include/linux/slab.h or
include/linux/skbuff.h differs between the two trees; gcc's
.constprop/.isra/.part clones count as their function), and every other
function whose frame or saved registers differ between base and series
(a changed inline helper moves its callers).  A changed function that
is inlined everywhere has no frame of its own; the record lists those
per object.  Flags: a series frame over FRAME_LIMIT bytes
(the lean series' target), a frame that grew; and, for information, a
function out of line in one tree only (new, gone).

The record: bench/stack.md and bench/stack.json under build/results/ (or
results/ with --record).  The disassembly and checkstack.pl output of
every object stay in build/stack/<tree>/O-<variant>-<alloc>/ for a reader
to check; the build logs are build/logs/stack-*.log.
"""
import argparse
import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import time
from typing import Any, Iterable, Optional

import gitrepo
import kconfig
import packages
import record
import registry
import tree
from common import (BASE_TAG, BRANCH, BUILD, TREE, Progress,
                    StageError, capture, log_path, need_tools, rel, say,
                    stream)

STACK = os.path.join(BUILD, "stack")
TREES = {"base": BASE_TAG, "series": BRANCH}
FRAME_LIMIT = 256
ALLOC_OBJECT = {"slub": "mm/slub.o", "slab": "mm/slab.o", "slob": "mm/slob.o"}
COMMON_OBJECTS = ("mm/slab_common.o", "net/core/skbuff.o")
# The sources whose functions each object's rows are chosen from: its own
# .c and the headers the series changes that it inlines from.
MM_HEADERS = ("mm/slab.h", "include/linux/slab.h")
OBJECT_SOURCES = {
    "mm/slub.o": ("mm/slub.c",) + MM_HEADERS,
    "mm/slab.o": ("mm/slab.c",) + MM_HEADERS,
    "mm/slob.o": ("mm/slob.c",) + MM_HEADERS,
    "mm/slab_common.o": ("mm/slab_common.c",) + MM_HEADERS,
    "net/core/skbuff.o": ("net/core/skbuff.c", "include/linux/skbuff.h",
                          "include/linux/slab.h"),
}
SOURCES = tuple(sorted({s for v in OBJECT_SOURCES.values() for s in v}))
# The bulk paths' functions, shown whether or not the series touches them
# (when out of line): the entry points, what they called on the base, and
# the NAPI skb cache that frees sk_buffs in bulk.
BULK_PATH = frozenset((
    "kmem_cache_alloc_bulk", "kmem_cache_free_bulk",
    "___slab_alloc", "__slab_alloc", "__slab_free", "slab_free",
    "do_slab_free", "build_detached_freelist",
    "cache_alloc_refill", "cache_flusharray", "___cache_free", "free_block",
    "slob_alloc", "slob_free",
    "kfree_skb_list_reason", "napi_skb_cache_get", "napi_skb_cache_put",
    "__kfree_skb_defer", "napi_consume_skb", "__napi_kfree_skb"))


@dataclasses.dataclass(frozen=True)
class Variant:
    """An architecture and unwinder to build the objects for."""
    name: str
    title: str
    arch: str                  # make ARCH=
    cross: str                 # CROSS_COMPILE=, '' for the host's gcc
    checkstack: str            # checkstack.pl's architecture argument
    word: int                  # bytes per saved register
    lines: tuple[str, ...]     # config lines on top of the fragments
    expect: tuple[str, ...]    # .config lines that must result

    @property
    def x86(self) -> bool:
        return self.arch in ("x86_64", "i386")

    def tool(self, name: str) -> str:
        return self.cross + name


VARIANTS = (
    Variant("x86_64-orc", "x86-64, ORC unwinder (the harness's configs)",
            "x86_64", "", "x86_64", 8, (),
            ("CONFIG_X86_64=y", "CONFIG_UNWINDER_ORC=y")),
    Variant("x86_64-fp", "x86-64, frame pointers (UNWINDER_FRAME_POINTER)",
            "x86_64", "", "x86_64", 8,
            ("# CONFIG_UNWINDER_ORC is not set",
             "CONFIG_UNWINDER_FRAME_POINTER=y"),
            ("CONFIG_X86_64=y", "CONFIG_UNWINDER_FRAME_POINTER=y",
             "CONFIG_FRAME_POINTER=y")),
    Variant("i386", "i386 (ARCH=i386, 32-bit; its default unwinder, "
            "frame pointers)", "i386", "", "i386", 4,
            ("# CONFIG_64BIT is not set",), ("CONFIG_X86_32=y",)),
    Variant("arm64", "arm64 (aarch64-linux-gnu-gcc; frame pointers always)",
            "arm64", "aarch64-linux-gnu-", "aarch64", 8, (),
            ("CONFIG_ARM64=y",)),
)
VARIANT_NAMES = tuple(v.name for v in VARIANTS)
ALLOC_LINE = {"slub": "CONFIG_SLUB=y", "slab": "CONFIG_SLAB=y",
              "slob": "CONFIG_SLOB=y"}
# Shown in the record: what each config came out as.
CONFIG_SHOWN = ("CONFIG_UNWINDER_ORC", "CONFIG_UNWINDER_FRAME_POINTER",
                "CONFIG_FRAME_POINTER", "CONFIG_INIT_STACK_ALL_ZERO",
                "CONFIG_STACKPROTECTOR", "CONFIG_SLUB_DEBUG",
                "CONFIG_SLAB_FREELIST_HARDENED", "CONFIG_MEMCG",
                "CONFIG_NR_CPUS", "CONFIG_NODES_SHIFT")


# ---------------------------------------------------------------- parsers

@dataclasses.dataclass(frozen=True)
class Frame:
    """One function's frame as its disassembly gives it."""
    sub: int            # bytes the prologue subtracts from the stack pointer
    saved: int          # callee-saved registers it saves
    frame: int          # the real frame: x86 sub + saved pushes; arm64 sub
    regs: tuple[str, ...] = ()


CHECKSTACK_RE = re.compile(r"^0x[0-9a-f]+ (\S+) \[([^\]]*)\]:\s*(-?\d+)\s*$")


def parse_checkstack(text: str) -> dict[str, int]:
    """{function: size} of checkstack.pl's output (its sum of every stack
    adjustment in the function; the largest when a name repeats)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = CHECKSTACK_RE.match(line)
        if m:
            out[m.group(1)] = max(out.get(m.group(1), 0), int(m.group(3)))
    return out


FUNC_RE = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
INSN_RE = re.compile(r"^\s*[0-9a-f]+:\t[^\t]*\t(\S+)\s*(.*?)\s*$")
# objdump's comments: x86 '  # 9531 <f+0x21>', arm64 '\t// #0' (an arm64
# immediate is '#N', with no space after the '#').
COMMENT_RE = re.compile(r"\s+(#|//)\s.*$")


def disassembly(text: str) -> dict[str, list[tuple[str, str]]]:
    """{function: [(mnemonic, operands)]} of objdump -d output (the
    continuation lines of long x86 encodings, which carry no
    instruction, are skipped; so are objdump's comments)."""
    funcs: dict[str, list[tuple[str, str]]] = {}
    cur: Optional[list[tuple[str, str]]] = None
    for line in text.splitlines():
        m = FUNC_RE.match(line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = INSN_RE.match(line)
        if m and cur is not None:
            ops = COMMENT_RE.sub("", m.group(2)).strip()
            cur.append((m.group(1), ops))
    return funcs


X86_SAVED = {8: ("%rbx", "%rbp", "%r12", "%r13", "%r14", "%r15"),
             4: ("%ebx", "%ebp", "%esi", "%edi")}
X86_IMM_SP_RE = re.compile(r"^\$(0x[0-9a-f]+|\d+),%[er]sp$")


def is_x86_branch(mnem: str) -> bool:
    return mnem.startswith(("j", "call", "ret", "ud2", "int3", "iret"))


def x86_decrement(mnem: str, ops: str, word: int) -> int:
    """Bytes this instruction takes off the stack pointer: 'sub $N,%rsp',
    or 'add $-N,%rsp' (objdump prints the immediate unsigned: gcc writes
    a 128-byte frame as 'add $0xffffffffffffff80,%rsp', whose imm8 -128
    fits where +128 does not); 0 for any other, and for the epilogues
    that give it back."""
    m = X86_IMM_SP_RE.match(ops)
    if not m or mnem not in ("sub", "subq", "subl", "add", "addq", "addl"):
        return 0
    value = int(m.group(1), 0)
    if value >= 1 << (8 * word - 1):
        value -= 1 << (8 * word)
    size = value if mnem.startswith("sub") else -value
    return max(size, 0)


def x86_frame(insns: list[tuple[str, str]], word: int) -> Frame:
    """The frame of an x86 function (see the module's doc): the
    callee-saved pushes, and the first 'sub $N,%rsp' from the first such
    push up to the first jump or call; without a push, the first such sub
    anywhere (a frame that gcc's shrink-wrapping put after an early
    return)."""
    saved = X86_SAVED[word]
    regs: list[str] = []
    for mnem, ops in insns:
        if mnem in ("push", "pushq", "pushl") and ops in saved \
                and ops not in regs:
            regs.append(ops)
    first = next((i for i, (mnem, ops) in enumerate(insns)
                  if mnem.startswith("push") and ops in saved), None)
    frame = 0
    for mnem, ops in insns[first or 0:]:
        if first is not None and is_x86_branch(mnem):
            break
        frame = x86_decrement(mnem, ops, word)
        if frame:
            break
    return Frame(frame, len(regs), frame + word * len(regs), tuple(regs))


ARM64_PRE_RE = re.compile(r"\[sp, #-(\d+)\]!$")
ARM64_SUB_RE = re.compile(r"^sp, sp, #(0x[0-9a-f]+|\d+)(?:, lsl #(\d+))?$")
ARM64_SAVED = tuple("x%d" % n for n in range(19, 31))
ARM64_BRANCHES = ("b", "bl", "br", "blr", "ret", "cbz", "cbnz", "tbz",
                  "tbnz", "brk")


def is_arm64_branch(mnem: str) -> bool:
    return mnem in ARM64_BRANCHES or mnem.startswith("b.")


def arm64_decrement(mnem: str, ops: str) -> int:
    """Bytes this instruction takes off sp (0 when none)."""
    pre = ARM64_PRE_RE.search(ops)
    if mnem in ("stp", "str") and pre:
        return int(pre.group(1))
    m = ARM64_SUB_RE.match(ops)
    if mnem == "sub" and m:
        return int(m.group(1), 0) << int(m.group(2) or 0)
    return 0


def arm64_frame(insns: list[tuple[str, str]]) -> Frame:
    """The frame of an arm64 function (see the module's doc)."""
    regs: list[str] = []
    for mnem, ops in insns:
        if mnem in ("stp", "str") and "[sp" in ops:
            for r in ops.split("[")[0].split(","):
                r = r.strip()
                if r in ARM64_SAVED and r not in regs:
                    regs.append(r)
    frame = 0
    first = next((i for i, (mnem, ops) in enumerate(insns)
                  if arm64_decrement(mnem, ops)), None)
    if first is not None:
        for mnem, ops in insns[first:]:
            if is_arm64_branch(mnem):
                break
            frame += arm64_decrement(mnem, ops)
    return Frame(frame, len(regs), frame, tuple(regs))


def parse_objdump(text: str, arch: str) -> dict[str, Frame]:
    """{function: Frame} of objdump -d output for arch ('x86_64', 'i386'
    or 'arm64')."""
    out = {}
    for name, insns in disassembly(text).items():
        if arch == "arm64":
            out[name] = arm64_frame(insns)
        else:
            out[name] = x86_frame(insns, 8 if arch == "x86_64" else 4)
    return out


# ------------------------------------------------------- source functions

NAME_RE = re.compile(r"([A-Za-z_]\w*)\s*$")
ANNOTATION_RE = re.compile(r"\s*\b__(?:acquires|releases|must_hold)\s*\("
                           r"[^()]*(?:\([^()]*\)[^()]*)*\)")


def declared_name(head: str) -> Optional[str]:
    """The function a definition's head (the lines before its '{')
    defines."""
    head = ANNOTATION_RE.sub("", head).strip()
    if not head.endswith(")"):
        return None
    depth = 0
    for i in range(len(head) - 1, -1, -1):
        if head[i] == ")":
            depth += 1
        elif head[i] == "(":
            depth -= 1
            if depth == 0:
                m = NAME_RE.search(head[:i])
                return m.group(1) if m else None
    return None


def source_functions(text: str) -> dict[str, list[str]]:
    """{name: [definition text, ...]} of a C file in kernel style: a
    definition's body opens with '{' alone at column 0 and closes with '}'
    at column 0 (a name defined under several #ifdefs has several)."""
    lines = text.splitlines()
    out: dict[str, list[str]] = {}
    for i, line in enumerate(lines):
        if line.rstrip() != "{":
            continue
        end = i
        while end > 0 and not lines[end - 1].strip():
            end -= 1            # __slab_free's head ends with a blank line
        j = end
        while j > 0 and end - j < 10:
            prev = lines[j - 1]
            if (not prev.strip() or prev.startswith("#")
                    or prev.rstrip().endswith((";", "}", "*/", "{"))):
                break
            j -= 1
        name = declared_name(" ".join(s.strip() for s in lines[j:end]))
        if not name:
            continue
        k = i + 1
        while k < len(lines) and not lines[k].startswith("}"):
            k += 1
        out.setdefault(name, []).append("\n".join(lines[j:k + 1]))
    return out


def changed_functions(base: str, series: str) -> dict[str, str]:
    """{name: 'added' | 'changed' | 'removed'} between two versions of a
    C file."""
    b, s = source_functions(base), source_functions(series)
    out = {}
    for name in sorted(set(b) | set(s)):
        if name not in b:
            out[name] = "added"
        elif name not in s:
            out[name] = "removed"
        elif b[name] != s[name]:
            out[name] = "changed"
    return out


def function_of(symbol: str) -> str:
    """The source function of a symbol: gcc's clones (foo.constprop.0,
    foo.isra.0, foo.part.0, foo.cold) are foo's."""
    return symbol.split(".")[0]


def is_cold(symbol: str) -> bool:
    """gcc's cold part of a function: no prologue of its own (its frame is
    the function's)."""
    return ".cold" in symbol


# ------------------------------------------------------------------ rows

@dataclasses.dataclass
class Row:
    obj: str
    function: str               # the source function
    base_symbol: Optional[str]
    series_symbol: Optional[str]
    base: Optional[Frame]
    series: Optional[Frame]
    base_cs: Optional[int]      # checkstack.pl's figure
    series_cs: Optional[int]
    change: str                 # 'added' / 'changed' / 'removed' / ''

    def flags(self) -> list[str]:
        out = []
        s, b = self.series, self.base
        if s and s.frame > FRAME_LIMIT:
            out.append(">%d" % FRAME_LIMIT)
        if s and b and s.frame > b.frame:
            out.append("GREW")
        if s and not b:
            out.append("new")
        if b and not s:
            out.append("gone")
        return out


def pair_symbols(base: Iterable[str], series: Iterable[str]
                 ) -> list[tuple[Optional[str], Optional[str]]]:
    """(base symbol, series symbol) pairs: the same name, or, when a
    function has exactly one clone on each side and the names differ
    (foo.isra.0 against foo.constprop.0), those two."""
    bs, ss = set(base), set(series)
    pairs: list[tuple[Optional[str], Optional[str]]] = [
        (n, n) for n in sorted(bs & ss)]
    only_b = sorted(bs - ss)
    only_s = sorted(ss - bs)
    for n in list(only_b):
        f = function_of(n)
        cb = [x for x in only_b if function_of(x) == f]
        cs = [x for x in only_s if function_of(x) == f]
        if len(cb) == 1 and len(cs) == 1 and f not in bs | ss:
            pairs.append((n, cs[0]))
            only_b.remove(n)
            only_s.remove(cs[0])
    pairs += [(n, None) for n in only_b] + [(None, n) for n in only_s]
    return sorted(pairs, key=lambda p: (p[1] or p[0] or ""))


def rows_for(obj: str, base: dict[str, Frame], series: dict[str, Frame],
             base_cs: dict[str, int], series_cs: dict[str, int],
             changes: dict[str, str]) -> list[Row]:
    """The rows of one object: every function whose source the series
    changes, every other one whose frame or saves differ, and those of
    BULK_PATH."""
    rows = []
    for b, s in pair_symbols([n for n in base if not is_cold(n)],
                             [n for n in series if not is_cold(n)]):
        fb = base.get(b) if b else None
        fs = series.get(s) if s else None
        func = function_of(s or b or "")
        change = changes.get(func, "")
        differs = (fb is None or fs is None or fb.frame != fs.frame
                   or fb.saved != fs.saved)
        if not change and not differs and func not in BULK_PATH:
            continue
        rows.append(Row(obj, func, b, s, fb, fs,
                        base_cs.get(b, 0) if b else None,
                        series_cs.get(s, 0) if s else None, change))
    return rows


def inlined(changes: dict[str, str], rows_syms: Iterable[str]) -> list[str]:
    """The changed functions with no symbol of their own in the object."""
    have = {function_of(n) for n in rows_syms}
    return sorted(n for n, c in changes.items() if c != "removed"
                  and n not in have)


# ---------------------------------------------------------------- render

def cell(f: Optional[Frame], field: str) -> str:
    return "-" if f is None else str(getattr(f, field))


def pair_cell(b: Optional[int], s: Optional[int]) -> str:
    if b is None and s is None:
        return "-"
    if b == s:
        return str(b)
    return "%s→%s" % ("-" if b is None else b, "-" if s is None else s)


def symbol_label(r: Row) -> str:
    names = [n for n in (r.base_symbol, r.series_symbol) if n]
    label = names[-1] if len(set(names)) == 1 else " → ".join(names)
    return "`%s`" % label + (" (%s)" % r.change if r.change else "")


def table(rows: list[Row]) -> list[str]:
    out = ["| function | object | base frame | series frame | saved regs "
           "| sub | checkstack.pl | flags |",
           "|---|---|--:|--:|--:|--:|--:|---|"]
    for r in rows:
        b, s = r.base, r.series
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            symbol_label(r), os.path.basename(r.obj), cell(b, "frame"),
            cell(s, "frame"),
            pair_cell(b.saved if b else None, s.saved if s else None),
            pair_cell(b.sub if b else None, s.sub if s else None),
            pair_cell(r.base_cs, r.series_cs),
            " ".join("**%s**" % f for f in r.flags())))
    return out


def is_flagged(r: Row) -> bool:
    """A row the record's summary lists: over the limit, or grown."""
    return any(f in (">%d" % FRAME_LIMIT, "GREW") for f in r.flags())


def render(results: list[dict[str, Any]], command: str) -> str:
    """The markdown record from the per-(variant, alloc) results."""
    out = ["# Stack frames of the slab bulk paths, base vs series", "",
           "Each function's own frame, read from `objdump -d` of the "
           "objects the series changes, built for each architecture and "
           "allocator from the harness's config fragments (`%s`; "
           "harness/stack.py says how frames are read)." % command, "",
           "- **frame**: the function's own frame, without the return "
           "address: x86 the prologue's `sub $N,%rsp` plus its pushes of "
           "callee-saved registers; arm64 the prologue's `stp x29, x30, "
           "[sp, #-N]!` and `sub sp, sp, #N`, which hold the saved "
           "registers.",
           "- **saved regs**: callee-saved registers the function saves "
           "(x86: pushes, frame pointer included; arm64: x19-x30).",
           "- **sub**: the prologue's stack pointer decrement alone.",
           "- **checkstack.pl**: 6.1's scripts/checkstack.pl, for "
           "comparison: on x86 it adds every `add $N,%rsp` epilogue (and "
           "on i386 every argument pop) to the prologue's sub, so its "
           "figure is the sub times the return paths, or more; it leaves "
           "out the pushes, and a 128-byte sub (`add $-128,%rsp`) comes "
           "out negative: 0.",
           "- **flags**: >%d: a series frame over %d bytes (the lean "
           "series' target); GREW: a series frame larger than the base's; "
           "new / gone: out of line in one tree only (for information)."
           % (FRAME_LIMIT, FRAME_LIMIT),
           "- a→b: base→series where the two differ; (added) / (changed): "
           "the series adds or changes the function's source.", ""]
    flagged = []
    for res in results:
        for r in res["row_objs"]:
            if is_flagged(r):
                flagged.append("%s %s: %s %s (frame %s→%s, saved regs "
                               "%s)" % (
                    res["variant"], res["alloc"], symbol_label(r),
                    " ".join(f for f in r.flags() if f != "new"),
                    cell(r.base, "frame"), cell(r.series, "frame"),
                    pair_cell(r.base.saved if r.base else None,
                              r.series.saved if r.series else None)))
    out += ["## Flagged", ""]
    out += ["- " + f for f in flagged] or ["None."]
    out.append("")
    for res in results:
        out += ["## %s, %s" % (res["title"], res["alloc"].upper()), ""]
        out.append("Config: %s; %s." % (", ".join(
            "%s=%s" % (k[7:], v) for k, v in res["config"].items()),
            res.get("compiler", "")))
        out.append("")
        out += table(res["row_objs"])
        out.append("")
        for obj, names in res["inlined"].items():
            if names:
                out.append("Changed or added in the series with no symbol "
                           "of their own in %s (inlined, or not built in "
                           "this config): %s." % (
                               os.path.basename(obj),
                               ", ".join("`%s`" % n for n in names)))
        out.append("")
    return "\n".join(out)


# ----------------------------------------------------------------- build

def tree_id(ref: str) -> str:
    return gitrepo.git(TREE, "stack", "rev-parse", ref + "^{tree}").strip()


def ensure_source(name: str, ref: str) -> str:
    """build/stack/<name>: the sources of ref, unpacked anew (objects and
    all) when they changed since the last run.  The files get the time of
    unpacking, so that no object older than its new source survives."""
    dest = os.path.join(STACK, name)
    stamp = os.path.join(STACK, name + ".tree")
    want = tree_id(ref)
    if os.path.isdir(dest) and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read().strip() == want:
                return dest
    say("stack: unpacking %s (%s) into %s" % (ref, want[:12], rel(dest)))
    if os.path.exists(stamp):
        os.remove(stamp)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    archive = subprocess.Popen(["git", "archive", want], cwd=TREE,
                               stdout=subprocess.PIPE)
    try:
        untar = subprocess.run(["tar", "-x", "-m", "-C", dest],
                               stdin=archive.stdout, capture_output=True,
                               text=True)
    finally:
        assert archive.stdout is not None
        archive.stdout.close()
        rc = archive.wait()
    if rc or untar.returncode:
        raise StageError("stack", "git archive %s | tar -x failed: %s"
                         % (ref, untar.stderr.strip()))
    with open(stamp, "w") as f:
        f.write(want + "\n")
    return dest


def make_vars(v: Variant) -> list[str]:
    out = ["ARCH=" + v.arch, "CC=ccache %s" % v.tool("gcc"),
           "HOSTCC=ccache gcc"]
    if v.cross:
        out.append("CROSS_COMPILE=" + v.cross)
    return out


def make_cmd(src: str, out: str, v: Variant, *targets: str) -> list[str]:
    return ["make", "-C", src, "O=" + out] + make_vars(v) + list(targets)


def read_config(path: str) -> dict[str, str]:
    """{CONFIG_X: value, 'n' for 'is not set'}."""
    out = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^(CONFIG_\w+)=(.*)$", line.strip())
            if m:
                out[m.group(1)] = m.group(2)
            m = re.match(r"^# (CONFIG_\w+) is not set$", line.strip())
            if m:
                out[m.group(1)] = "n"
    return out


def configure(src: str, out: str, v: Variant, alloc: str, log: str) -> None:
    """out/.config: the allocator's fragments plus the variant's lines;
    skipped when what it was written from is unchanged."""
    files = kconfig.fragment_files(alloc)
    h = hashlib.sha256()
    for path in files:
        with open(path, "rb") as f:
            h.update(f.read())
    h.update(("\n".join(v.lines) + "\n" + " ".join(make_vars(v))).encode())
    key = h.hexdigest()[:16]
    keyfile = os.path.join(out, "stack.config-key")
    config = os.path.join(out, ".config")
    os.makedirs(out, exist_ok=True)
    if os.path.exists(keyfile) and os.path.exists(config):
        with open(keyfile) as f:
            if f.read().strip() == key:
                return
        os.remove(keyfile)
    extra = os.path.join(out, "stack-variant.config")
    with open(extra, "w") as f:
        f.write("# ./bulk stack: %s\n%s\n" % (v.name, "\n".join(v.lines)))
    frag = os.path.join(out, "stack.fragment")
    rc = stream([os.path.join(src, "scripts", "kconfig", "merge_config.sh"),
                 "-m"] + files + [extra], log, cwd=out,
                env={"KCONFIG_CONFIG": frag})
    for cmd in (make_cmd(src, out, v, "KCONFIG_ALLCONFIG=" + frag,
                         "allnoconfig"),
                make_cmd(src, out, v, "olddefconfig")):
        if rc == 0:
            rc = stream(cmd, log)
    if rc != 0:
        raise StageError("stack", "config %s %s failed" % (v.name, alloc), log)
    have = read_config(config)
    bad = []
    for line in v.expect + (ALLOC_LINE[alloc],):
        k, _, val = line.partition("=")
        if have.get(k) != val:
            bad.append("%s (is %s)" % (line, have.get(k, "absent")))
    if bad:
        raise StageError("stack", "config %s %s: lines that did not take "
                         "effect" % (v.name, alloc), log, "\n".join(bad))
    with open(keyfile, "w") as f:
        f.write(key + "\n")


def objects(alloc: str) -> list[str]:
    return [ALLOC_OBJECT[alloc]] + list(COMMON_OBJECTS)


Built = tuple[dict[str, dict[str, Frame]], dict[str, dict[str, int]],
              dict[str, str]]


def build_one(tree: str, src: str, v: Variant, alloc: str) -> Built:
    """Build the objects of one (tree, variant, allocator); ({object:
    {symbol: Frame}}, {object: {symbol: checkstack.pl's figure}}, the
    config lines shown)."""
    out = os.path.join(src, "O-%s-%s" % (v.name, alloc))
    log = log_path("stack-%s-%s-%s.log" % (tree, v.name, alloc))
    open(log, "w").close()
    configure(src, out, v, alloc, log)
    objs = objects(alloc)
    label = "stack %s %s %s" % (tree, v.name, alloc)
    progress = Progress(label, lambda line: line.lstrip().startswith(
        ("CC", "LD", "AS", "HOSTCC")), every=60)
    rc = stream(make_cmd(src, out, v, "-j%d" % (os.cpu_count() or 1),
                         *objs), log,
                env={"CCACHE_BASEDIR": STACK}, progress=progress)
    if rc != 0:
        raise StageError("stack", "%s: make failed" % label, log)
    frames, cs = {}, {}
    for obj in objs:
        path = os.path.join(out, obj)
        dis = capture([v.tool("objdump"), "-d", path], "stack")
        base = os.path.join(out, "stack-" + os.path.basename(obj))
        with open(base + ".dis", "w") as f:
            f.write(dis)
        checked = capture(["perl", os.path.join(src, "scripts",
                                                "checkstack.pl"),
                           v.checkstack, "0"], "stack", stdin=dis)
        with open(base + ".checkstack", "w") as f:
            f.write(checked)
        frames[obj] = parse_objdump(dis, v.arch)
        cs[obj] = parse_checkstack(checked)
    have = read_config(os.path.join(out, ".config"))
    shown = {k: have[k] for k in CONFIG_SHOWN if k in have}
    say("%s: done in %ds" % (label, progress.elapsed()))
    return frames, cs, shown


def source_changes(srcs: dict[str, str]) -> dict[str, dict[str, str]]:
    """{source file: {function: change}} between the two trees."""
    out = {}
    for path in SOURCES:
        text = {}
        for t, src in srcs.items():
            with open(os.path.join(src, path), errors="replace") as f:
                text[t] = f.read()
        out[path] = changed_functions(text["base"], text["series"])
    return out


def object_changes(obj: str, changes: dict[str, dict[str, str]]
                   ) -> dict[str, str]:
    """The changed functions an object's rows are chosen by: its .c
    first, then the headers."""
    out: dict[str, str] = {}
    for path in reversed(OBJECT_SOURCES[obj]):
        out.update(changes.get(path, {}))
    return out


def pick(names: str, known: tuple[str, ...], what: str) -> list[str]:
    out = [n for n in names.split(",") if n]
    bad = [n for n in out if n not in known]
    if bad or not out:
        raise StageError("stack", "unknown %s %s; known: %s" % (
            what, ",".join(bad) or "(none given)", ",".join(known)))
    return out


def row_json(r: Row) -> dict[str, Any]:
    return {"object": r.obj, "function": r.function, "change": r.change,
            "base_symbol": r.base_symbol, "series_symbol": r.series_symbol,
            "base": dataclasses.asdict(r.base) if r.base else None,
            "series": dataclasses.asdict(r.series) if r.series else None,
            "checkstack_base": r.base_cs, "checkstack_series": r.series_cs,
            "flags": r.flags()}


def main(args: argparse.Namespace) -> int:
    variants = [v for v in VARIANTS
                if v.name in pick(args.arch, VARIANT_NAMES, "variant")]
    allocs = pick(args.alloc, registry.ALLOCATORS, "allocator")
    tools = ["make", "perl", "ccache", "gcc", "objdump", "tar", "git"]
    for v in variants:
        tools += [v.tool("gcc"), v.tool("objdump")]
    need_tools("stack", sorted(set(tools)))
    packages.require("stack")
    tree.create()
    start = time.time()
    st = record.stamp()
    os.makedirs(STACK, exist_ok=True)
    srcs = {t: ensure_source(t, ref) for t, ref in TREES.items()}
    changes = source_changes(srcs)
    results: list[dict[str, Any]] = []
    for v in variants:
        compiler = capture([v.tool("gcc"), "--version"],
                           "stack").splitlines()[0]
        for alloc in allocs:
            built = {t: build_one(t, srcs[t], v, alloc) for t in TREES}
            rows: list[Row] = []
            inl: dict[str, list[str]] = {}
            for obj in objects(alloc):
                ch = object_changes(obj, changes)
                obj_rows = rows_for(obj, built["base"][0][obj],
                                    built["series"][0][obj],
                                    built["base"][1][obj],
                                    built["series"][1][obj], ch)
                rows += obj_rows
                own = changes.get(OBJECT_SOURCES[obj][0], {})
                inl[obj] = inlined(own, built["series"][0][obj])
            results.append({"variant": v.name, "title": v.title,
                            "alloc": alloc, "config": built["series"][2],
                            "compiler": compiler, "row_objs": rows,
                            "inlined": inl})
    folder = record.folder("bench", args.record)
    md = record.write_markdown(os.path.join(folder, "stack.md"),
                               render(results, st.command), st)
    record.write_json(os.path.join(folder, "stack.json"), {
        "frame_limit": FRAME_LIMIT,
        "trees": {t: tree_id(ref) for t, ref in TREES.items()},
        "source_changes": changes,
        "results": [{"variant": r["variant"], "title": r["title"],
                     "alloc": r["alloc"], "config": r["config"],
                     "compiler": r["compiler"], "inlined": r["inlined"],
                     "rows": [row_json(x) for x in r["row_objs"]]}
                    for r in results]}, st)
    flagged = sum(1 for r in results for x in r["row_objs"] if is_flagged(x))
    say("stack: %d table(s), %d flagged row(s) -> %s in %s (%dm%02ds)" % (
        len(results), flagged, rel(md), record.where(args.record),
        *divmod(int(time.time() - start), 60)))
    return 0

