#!/usr/bin/env python3
"""The docs test (label `docs`): keeps the README, docs/ and bench/RESULTS.md true.

  tests/docs_check.py [--root DIR] [--self-test]        links and quoted paths
  tests/docs_check.py [--root DIR] --lab LENET5_BINARY   the kernel lab tutorial's command lines

Links: every relative link resolves to a file or folder, and a link to a Markdown heading
(FILE.md#anchor or #anchor) names a heading that exists (GitHub's anchors). Quoted paths: every
path under the project's folders that the pages quote (bench/gpu/x.sh, host/io/checkpoint.h, ...)
is a tracked file or folder (git ls-files; the file system where there is no git). Adding a layer:
docs/adding-a-layer.md's steps name exactly the files `git grep -il dropout -- host cpu_opt cl_kernels`
lists, and the page states their count. --self-test
first checks that a page with a broken link, a missing anchor and an untracked script fails.

--lab runs every `$ ` command line of docs/kernel-lab.md in a scratch folder, in order, with
./build/lenet5 the given binary: a `sed -i` must change its file, a command whose output in the page
has `lenet5: error:` must fail and one without must succeed, and the figures the page quotes that
do not depend on the machine (the files dumped, the layer named, the file:line of a compile error,
"matches cpu") must be what the binary says, and a compile error must name the line the sed broke. For speed on CI's 2 cores the one-epoch runs take
640 images, not 6,400, and epoch_bench.py one round (LENET5_DOCS_FULL=1 runs them as written).
Exit 77 (skipped) without OpenCL in the binary or without MNIST (unless LENET5_REQUIRE_MNIST=1).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

PAGES = ["README.md", "docs/*.md", "bench/RESULTS.md", "bench/results/README.md"]
# Scripts and sources the pages quote, under the project's own folders (globs such as bench/gpu/*_gpu.sh
# allowed); data and outputs that runs make (data/mnist, bench/results/epochs.md) are not checked.
PATH_RE = re.compile(r"(?<![\w./-])((?:bench|tests|host|cpu_opt|cl_kernels|models|data|fuzz|cmake|docs|\.ci)"
                     r"/[\w.*/-]*\.(?:sh|py|js|cpp|h|cl|net|in|supp))(?![\w/-])")
LINK_RE = re.compile(r"(?<!\!)\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)\)")
SKIP = 77


def pages(root):
    import glob
    out = []
    for p in PAGES:
        out += sorted(glob.glob(os.path.join(root, p)))
    return out


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    h = re.sub(r"<[^>]+>", "", heading.strip()).lower()
    h = "".join(c for c in h if c.isalnum() or c in " -_")
    return h.replace(" ", "-")


def anchors(path):
    found, counts, fence = set(), {}, False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        if fence:
            continue
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = counts.get(s, 0)
            counts[s] = n + 1
            found.add(s if n == 0 else "%s-%d" % (s, n))
    return found


def tracked(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True).stdout
        files = set(out.decode().split("\0")) - {""}
    except (OSError, subprocess.CalledProcessError):
        return None
    dirs = set()
    for f in files:
        parts = f.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    return files | dirs


def check_pages(root, files, known):
    import fnmatch
    errors = []
    for page in files:
        rel = os.path.relpath(page, root)
        text = open(page, encoding="utf-8").read()
        prose = re.sub(r"```.*?```", "", text, flags=re.S)  # links in code blocks are not links
        for target in LINK_RE.findall(prose):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest):
                errors.append("%s: link to %s: no such file" % (rel, target))
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                errors.append("%s: link to %s: no heading with that anchor in %s" %
                              (rel, target, os.path.relpath(dest, root)))
        for quoted in sorted(set(PATH_RE.findall(text))):
            path = quoted.rstrip("/.")
            if "*" in path:
                ok = known is not None and any(fnmatch.fnmatch(f, path) for f in known)
                ok = ok or (known is None and __import__("glob").glob(os.path.join(root, path)))
            else:
                ok = (path in known) if known is not None else os.path.exists(os.path.join(root, path))
            if not ok:
                errors.append("%s: quotes %s, which is not a tracked file or folder" % (rel, quoted))
    return errors


def check_results_index(root, known):
    """Every tracked file and folder directly in bench/results has its row in bench/results/README.md."""
    index = os.path.join(root, "bench", "results", "README.md")
    if known is None or not os.path.exists(index):
        return []
    listed = set(re.findall(r"^\| \[([^\]]+)\]", open(index, encoding="utf-8").read(), flags=re.M))
    entries = {f.split("/")[2] for f in known if f.startswith("bench/results/") and f.count("/") >= 2}
    return ["bench/results/README.md: no row for %s" % e
            for e in sorted(entries - listed - {"README.md", "JOURNAL.md"})]


def check_adding_a_layer(root):
    """docs/adding-a-layer.md walks through exactly the files that mention dropout under host/, cpu_opt/
    and cl_kernels/ (its `## N. `path`` headings), and states their count."""
    page = os.path.join(root, "docs", "adding-a-layer.md")
    if not os.path.exists(page):
        return ["docs/adding-a-layer.md is missing"]
    text = open(page, encoding="utf-8").read()
    named = re.findall(r"^## \d+\. `([^`]+)`", text, flags=re.M)
    try:
        out = subprocess.run(["git", "-C", root, "grep", "-il", "dropout", "--", "host", "cpu_opt", "cl_kernels"],
                             capture_output=True, check=True).stdout.decode().split()
    except (OSError, subprocess.CalledProcessError):
        return []  # no git here: nothing to compare with
    errors = []
    if sorted(named) != sorted(out):
        errors.append("docs/adding-a-layer.md walks through %s; the files that mention dropout are %s" %
                      (", ".join(named), ", ".join(out)))
    count = re.search(r"\*\*(\d+) files?\*\*", text)
    if not count or int(count.group(1)) != len(out):
        errors.append("docs/adding-a-layer.md states %s files; git grep finds %d" %
                      (count.group(1) if count else "no count of", len(out)))
    return errors


def self_test():
    """The checker must fail on a broken link, a missing anchor and an untracked script."""
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "docs"))
        open(os.path.join(d, "docs", "ok.md"), "w").write("# Ok\n\n## A heading (`x`)\n")
        cases = {
            "[good](docs/ok.md#a-heading-x) and [good](docs/ok.md)": 0,
            "[broken](docs/missing.md)": 1,
            "[broken anchor](docs/ok.md#no-such-heading)": 1,
            "run `bench/gpu/no_such_script.sh` first": 1,
        }
        for text, want in cases.items():
            page = os.path.join(d, "README.md")
            open(page, "w").write(text + "\n")
            got = len(check_pages(d, [page], {"docs", "docs/ok.md", "README.md"}))
            if (got > 0) != (want > 0):
                return "self-test: %r gave %d errors, expected %s" % (text, got, "some" if want else "none")
        os.makedirs(os.path.join(d, "bench", "results"))
        open(os.path.join(d, "bench", "results", "README.md"), "w").write("| [a.txt](a.txt) | x | y |\n")
        known = {"bench/results/README.md", "bench/results/a.txt", "bench/results/b/c.txt"}
        if check_results_index(d, known) != ["bench/results/README.md: no row for b"]:
            return "self-test: an unindexed folder in bench/results went unnoticed"
    return None


def lab_commands(root):
    """The `$ ` lines of the tutorial, each with the output lines the page shows after it."""
    cmds, fence, cur = [], False, None
    for line in open(os.path.join(root, "docs", "kernel-lab.md"), encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith("```"):
            fence, cur = not fence, None
            continue
        if not fence:
            continue
        if line.startswith("$ "):
            cur = [line[2:], []]
            cmds.append(cur)
        elif cur is not None:
            cur[1].append(line)
    return cmds


def run_lab(root, binary):
    binary = os.path.abspath(binary)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    if "gpu-local" not in version:
        print("docs_check: the binary has no OpenCL variants; the kernel lab is skipped")
        return SKIP
    data = os.environ.get("LENET5_DATA") or os.path.join(root, "data", "mnist")
    if not os.path.exists(os.path.join(data, "train-images-idx3-ubyte")) and \
       not os.path.exists(os.path.join(data, "train-images-idx3-ubyte.gz")):
        if os.environ.get("LENET5_REQUIRE_MNIST") == "1":
            print("docs_check: MNIST is missing from %s" % data)
            return 1
        print("docs_check: MNIST not fetched (data/fetch_mnist.sh); the kernel lab is skipped")
        return SKIP
    full = os.environ.get("LENET5_DOCS_FULL") == "1"
    cmds = lab_commands(root)
    if not cmds:
        print("docs_check: no command lines in docs/kernel-lab.md")
        return 1
    errors = []
    with tempfile.TemporaryDirectory(prefix="lenet5_docs_lab_") as d:
        os.makedirs(os.path.join(d, "build"))
        os.symlink(binary, os.path.join(d, "build", "lenet5"))
        os.symlink(os.path.join(root, "bench"), os.path.join(d, "bench"))
        os.makedirs(os.path.join(d, "data"))
        os.symlink(os.path.abspath(data), os.path.join(d, "data", "mnist"))
        env = dict(os.environ, LENET5_DATA=os.path.join(d, "data", "mnist"))
        env.pop("LENET5_KERNELS", None)
        changed = {}
        for cmd, shown in cmds:
            run = cmd
            if not full:
                run = run.replace("--train-limit 6400", "--train-limit 640").replace("--repeats 3", "--repeats 1")
            edited = None
            m = re.match(r"sed -i .* (\S+)$", cmd)
            if m:
                edited = os.path.join(d, m.group(1))
                before = open(edited, "rb").read() if os.path.exists(edited) else None
            r = subprocess.run(run, shell=True, cwd=d, env=env, capture_output=True, text=True, timeout=600)
            out = r.stdout + r.stderr
            where = "docs/kernel-lab.md: `%s`" % cmd
            if edited is not None and (before is None or open(edited, "rb").read() == before):
                errors.append("%s: changed nothing (the line it edits is no longer in the kernels)" % where)
            shown_text = "\n".join(shown)
            fails = "lenet5: error:" in shown_text
            if fails and r.returncode == 0:
                errors.append("%s: succeeded; the page shows it failing" % where)
            if not fails and r.returncode != 0:
                errors.append("%s: failed (exit %d): %s" % (where, r.returncode, out.strip()[-600:]))
            if edited is not None and before is not None:
                old, new = before.decode().split("\n"), open(edited).read().split("\n")
                changed[os.path.relpath(edited, d)] = [i + 1 for i, (a, b) in enumerate(zip(old, new)) if a != b]
            # A compile error names the file and the line the sed broke (the page's line number may
            # drift as the kernels change; the file and the behaviour may not).
            where_err = re.search(r"(lab/[\w/]+\.cl):(\d+):", shown_text)
            if where_err:
                got = re.search(r"(lab/[\w/]+\.cl):(\d+):", out)
                want_lines = changed.get(where_err.group(1), [])
                if not got or got.group(1) != where_err.group(1) or int(got.group(2)) not in want_lines:
                    errors.append("%s: the compiler's error should name %s at line %s, the binary says %r" %
                                  (where, where_err.group(1), want_lines, got.group(0) if got else None))
            for pattern in (r"wrote the (\d+) embedded kernel files", r"in layer (\w+) \(", r"(matches cpu)"):
                want = re.search(pattern, shown_text)
                if want and want.group(1) not in (re.findall(pattern, out) or [None]):
                    errors.append("%s: the page says %r, the binary %r" %
                                  (where, want.group(0), (re.search(pattern, out) or [None])[0]))
        if not os.path.isdir(os.path.join(d, "lab")):
            errors.append("docs/kernel-lab.md: no lab folder was made")
    for e in errors:
        print("docs_check: " + e)
    print("docs_check: the kernel lab's %d command lines: %s" % (len(cmds), "FAILED" if errors else "ok"))
    return 1 if errors else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--lab", metavar="LENET5_BINARY")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    if args.lab:
        return run_lab(root, args.lab)
    if args.self_test:
        err = self_test()
        if err:
            print("docs_check: " + err)
            return 1
    files = pages(root)
    known = tracked(root)
    errors = check_pages(root, files, known) + check_results_index(root, known) + check_adding_a_layer(root)
    for e in errors:
        print("docs_check: " + e)
    print("docs_check: %d pages: %s" % (len(files), "%d problems" % len(errors) if errors else "every link and path ok"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
