"""The code reads as its pipeline: imports run one way, none hides in a
function, nothing imported goes unused, every option says what it does,
and docs/harness.md's table of stages names every module."""
import argparse
import ast
import os
import re
import unittest

import hermetic
import cli

HARNESS = os.path.join(hermetic.ROOT, "harness")
MODULES = sorted(f[:-3] for f in os.listdir(HARNESS) if f.endswith(".py"))


def parse(mod):
    with open(os.path.join(HARNESS, mod + ".py")) as f:
        return ast.parse(f.read())


def import_stmts(module):
    """The import statements a module runs when it is imported: those at
    its top level and those under module-level if/try blocks (at any
    depth), not those in a function or class body."""
    todo = list(module.body)
    while todo:
        stmt = todo.pop(0)
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            yield stmt
        elif isinstance(stmt, (ast.If, ast.Try, ast.TryStar)):
            blocks = [stmt.body, stmt.orelse]
            if not isinstance(stmt, ast.If):
                blocks += [h.body for h in stmt.handlers] + [stmt.finalbody]
            todo += [s for block in blocks for s in block]


def imports(module):
    """Harness modules a module imports (see import_stmts)."""
    out = set()
    for stmt in import_stmts(module):
        if isinstance(stmt, ast.Import):
            out |= {a.name for a in stmt.names}
        elif stmt.module:
            out.add(stmt.module)
    return out & set(MODULES)


class ImportGraph(unittest.TestCase):
    def test_no_import_inside_a_function(self):
        for mod in MODULES:
            for node in ast.walk(parse(mod)):
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    inner = [n for n in ast.walk(node)
                             if isinstance(n, (ast.Import, ast.ImportFrom))]
                    self.assertEqual(inner, [], "%s.%s" % (mod, node.name))

    def test_no_cycle(self):
        graph = {m: imports(parse(m)) for m in MODULES}
        done, path = set(), []

        def visit(m):
            self.assertNotIn(m, path, "import cycle: " + " -> ".join(path + [m]))
            if m in done:
                return
            path.append(m)
            for n in sorted(graph[m]):
                visit(n)
            path.pop()
            done.add(m)
        for m in MODULES:
            visit(m)

    def test_every_import_is_used(self):
        for mod in MODULES:
            tree = parse(mod)
            names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            names |= {n.value.id for n in ast.walk(tree)
                      if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
            for stmt in import_stmts(tree):
                for a in stmt.names:
                    name = (a.asname or a.name).split(".")[0]
                    self.assertIn(name, names, "%s imports %s unused" % (mod, name))

    def test_imports_under_module_level_if_and_try_are_seen(self):
        module = ast.parse(
            "import common\n"
            "if common.X:\n    import kconfig\nelse:\n    import kbuild\n"
            "try:\n    from boot import x\nexcept ImportError:\n"
            "    if True:\n        import tree\nfinally:\n    import steps\n"
            "def f():\n    import bench\n"
            "class C:\n    import render\n")
        self.assertEqual(imports(module), {"common", "kconfig", "kbuild", "boot",
                                           "tree", "steps"})


class Help(unittest.TestCase):
    def test_every_option_has_help(self):
        def check(parser, where):
            for action in parser._actions:
                if isinstance(action, argparse._SubParsersAction):
                    for name, sub in action.choices.items():
                        check(sub, where + " " + name)
                elif not isinstance(action, argparse._HelpAction):
                    self.assertTrue(action.help, "%s %s" % (where, action.dest))
        check(cli.parser(), "./bulk")

    def test_test_groups_are_listed(self):
        sub = [a for a in cli.parser()._actions
               if isinstance(a, argparse._SubParsersAction)][0]
        text = sub.choices["test"].format_help()
        for group in ("setup", "unit", "build-each", "kunit", "bench"):
            self.assertRegex(text, "\n  %s +[a-z]" % group)


class StagesTable(unittest.TestCase):
    def setUp(self):
        with open(os.path.join(hermetic.ROOT, "docs", "harness.md")) as f:
            text = f.read()
        table = next(b for b in text.split("## Stages", 1)[1].split("\n\n")
                     if b.startswith("|"))
        # the modules column of each row
        self.order = [m for row in table.splitlines()[2:]
                      for m in re.findall(r"`(\w+)\.py`", row.split("|")[2])]

    def test_pipeline_table_names_every_module_once(self):
        self.assertEqual(sorted(self.order), MODULES)

    def test_modules_import_only_what_the_table_names_before_them(self):
        for i, mod in enumerate(self.order):
            later = imports(parse(mod)) - set(self.order[:i])
            self.assertEqual(later, set(), "%s imports modules named after it" % mod)
