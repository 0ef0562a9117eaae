"""The base that moves: setup's choice of linux-source-6.1, the test
command's base step on a drifted version, and ./bulk move-base's pieces,
with two Debian versions."""
import os
import unittest
from unittest import mock

import hermetic
import base
import movebase
import packages
import test
from common import TREE, StageError
from hermetic import git

OLD, NEW = "6.1.192-2", "6.1.192-3"
MADISON = ("linux-source-6.1 | %s | http://deb.example/debian-security "
           "bookworm-security/main amd64 Packages\n"
           "linux-source-6.1 | %s | http://deb.example/debian-security "
           "bookworm-security/main amd64 Packages\n" % (NEW, OLD))


class SourceChoice(unittest.TestCase):
    def test_madison_versions_newest_first(self):
        self.assertEqual(packages.served_versions(MADISON), [NEW, OLD])

    def test_recorded_version_while_served(self):
        served = [NEW, OLD]
        self.assertEqual(packages.source_choice(OLD, None, served), (OLD, None))
        # a newer one installed by hand is put back to the recorded one
        self.assertEqual(packages.source_choice(OLD, NEW, served), (OLD, None))
        self.assertEqual(packages.source_choice(OLD, OLD, served), (None, None))

    def test_newest_with_a_note_once_the_recorded_is_gone(self):
        version, note = packages.source_choice(OLD, None, [NEW])
        self.assertEqual(version, NEW)
        self.assertIn("BASE DRIFT", note)
        self.assertIn(OLD, note)
        self.assertIn(NEW, note)
        self.assertEqual(packages.source_choice(OLD, NEW, [NEW])[0], None)


class Setup(unittest.TestCase):
    def run_setup(self, installed, served):
        with mock.patch.object(packages, "installed_versions",
                               return_value=installed), \
             mock.patch.object(packages, "recorded_version", return_value=OLD), \
             mock.patch.object(packages, "served_sources",
                               return_value=served) as self.update, \
             mock.patch.object(packages, "listed_sources", return_value=served), \
             mock.patch.object(packages, "NOTED", []), \
             mock.patch.object(packages, "apt_install") as apt, \
             mock.patch.object(packages, "warn") as warn:
            packages.setup()
        return apt, warn

    def everything(self, version):
        have = {p: "1" for p in packages.APT_PACKAGES}
        have[packages.SOURCE_PACKAGE] = version
        return have

    def test_recorded_version_reinstalled(self):
        apt, warn = self.run_setup(self.everything(NEW), [NEW, OLD])
        apt.assert_called_once_with(["linux-source-6.1=" + OLD])
        warn.assert_not_called()

    def test_drift_warned_in_one_line(self):
        apt, warn = self.run_setup(self.everything(NEW), [NEW])
        apt.assert_not_called()
        self.assertEqual(len(warn.call_args[0][0].splitlines()), 1)

    def test_drift_without_apt_get_update(self):
        # apt's lists no longer name the recorded version: no apt-get update
        self.run_setup(self.everything(NEW), [NEW])
        self.update.assert_not_called()

    def test_drift_said_once(self):
        with mock.patch.object(packages, "NOTED", []), \
             mock.patch.object(packages, "warn") as warn:
            for _ in range(2):
                packages.note_drift(packages.drift_note(NEW, OLD))
        warn.assert_called_once()
        self.assertNotIn("once it does", warn.call_args[0][0])

    def test_nothing_to_do(self):
        apt, warn = self.run_setup(self.everything(OLD), [NEW, OLD])
        apt.assert_not_called()


class BaseStep(unittest.TestCase):
    def state(self, version, digest):
        rec = {"VERSION": OLD, "TARBALL_SHA256": "aa"}
        return base.BaseState(version, "/x.tar.xz", digest,
                              base.drift_message(rec, version, digest), rec)

    def test_drifted_version_passes_with_its_note(self):
        with mock.patch.object(base, "check", return_value=self.state(NEW, "bb")):
            self.assertIn(NEW, test.base_drift())

    def test_recorded_version_other_tarball_fails(self):
        with mock.patch.object(base, "check", return_value=self.state(OLD, "bb")):
            with self.assertRaises(StageError):
                test.base_drift()

    def test_recorded_base_passes_silently(self):
        with mock.patch.object(base, "check", return_value=self.state(OLD, "aa")):
            self.assertIsNone(test.base_drift())


class MoveBase(unittest.TestCase):
    def test_target_is_newest_or_the_one_asked(self):
        self.assertEqual(movebase.target_version(None, [NEW, OLD]), NEW)
        self.assertEqual(movebase.target_version(OLD, [NEW, OLD]), OLD)
        with self.assertRaises(StageError):
            movebase.target_version("6.1.999-1", [NEW, OLD])
        with self.assertRaises(StageError):
            movebase.target_version(None, [])

    def test_diff_of_two_bases_counts_lines_and_files(self):
        hermetic.make_repo(TREE)
        work = os.path.join(hermetic.SCRATCH, "move-base")
        movebase.keep_base_files(os.path.join(work, "old"))
        with open(os.path.join(TREE, "mm", "slub.c"), "a") as f:
            f.write("a new line\n")
        git(TREE, "commit", "-qam", "next base")
        git(TREE, "tag", "-f", "base")
        movebase.keep_base_files(os.path.join(work, "new"))
        out = os.path.join(work, "d.diff")
        changed, files = movebase.diff_bases(os.path.join(work, "old"),
                                             os.path.join(work, "new"), out)
        self.assertEqual((changed, files), (1, ["mm/slub.c"]))
        # the same base twice: nothing
        movebase.keep_base_files(os.path.join(work, "old"))
        self.assertEqual(movebase.diff_bases(os.path.join(work, "old"),
                                             os.path.join(work, "new"), out),
                         (0, []))


if __name__ == "__main__":
    unittest.main()
