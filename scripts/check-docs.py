#!/usr/bin/env python3
"""The docs name what exists (scripts/check-docs.sh runs this; see its header for the rules).

(a) Every environment variable the workspace's non-test code reads is in docs/configuration.md.
(b) Every repository path a document names exists, every `file.rs::name` names something in that
    file, every relative Markdown link reaches a file (and its #anchor a heading there), and every
    `docs/x.md "Section"` reference names a heading or a bold item of that document.

Prints one line per offender (`file:line: what is wrong`) and exits 1 when there is any.
Standard library only.
"""

import glob
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
os.chdir(ROOT)

CONFIG_DOC = "docs/configuration.md"
# History records what was, including files that no longer exist: its paths are not checked (its
# links and section references are).
HISTORY_DOCS = {"CHANGELOG.md", "docs/benchmarks-log.md"}

problems = []


def problem(where, text):
    problems.append(f"{where}: {text}")


def tracked(*patterns):
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *patterns],
                         check=True, capture_output=True, text=True).stdout
    return sorted(p for p in set(out.split("\n")) if p and os.path.exists(p))


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# ---------------------------------------------------------------------------------------------
# (a) environment variables
# ---------------------------------------------------------------------------------------------

def workspace_members():
    text = read("Cargo.toml")
    block = re.search(r"members\s*=\s*\[(.*?)\]", text, re.S)
    return re.findall(r'"([^"]+)"', block.group(1)) if block else []


# The test-only crate: its variables are the harness's (tests/src/cluster.rs, helpers.rs), read
# through helpers that take the name as an argument, so no grep can list them.
TEST_ONLY_CRATES = {"tests"}


def non_test_sources():
    """Rust files of the workspace that are not tests, benches or examples."""
    files = []
    for crate in workspace_members():
        if crate in TEST_ONLY_CRATES:
            continue
        for path in tracked(f"{crate}/src/*.rs", f"{crate}/src/**/*.rs"):
            base = os.path.basename(path)
            if base == "tests.rs" or base.endswith("_tests.rs") or "/tests/" in path:
                continue
            files.append(path)
    return files


STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'')


def without_test_modules(text):
    """The text with every `#[cfg(test)]` item blanked (lines kept, so line numbers stay)."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i].strip().startswith("#[cfg(test)]"):
            depth, opened = 0, False
            j = i
            while j < len(lines):
                code = STRING.sub('""', lines[j])
                depth += code.count("{") - code.count("}")
                opened = opened or "{" in code
                out.append("")
                j += 1
                if (opened and depth <= 0) or (not opened and code.rstrip().endswith(";")):
                    break
            i = j
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


NAME = r"([A-Z][A-Z0-9_]*[A-Z0-9])"
READS = [
    re.compile(r'\benv\s*=\s*"' + NAME + '"'),                      # clap #[arg(env = "...")]
    re.compile(r'\benv::var(?:_os)?\(\s*"' + NAME + '"'),           # std::env::var("...")
    re.compile(r'\b(?:option_)?env!\(\s*"' + NAME + '"'),           # env!/option_env!
    # Any literal that names a setting of ours, e.g. a helper `set("OTEL_EXPORTER_OTLP_ENDPOINT")`.
    re.compile(r'"((?:BUZZ|OTEL|NATS|REDIS|RELAY|DATABASE|PG)_[A-Z0-9_]*[A-Z0-9])"'),
]
IMPLICIT = [(re.compile(r"\b(?:try_)?from_default_env\b"), "RUST_LOG")]  # tracing's EnvFilter


def env_reads():
    """{variable: first file:line that reads it}"""
    found = {}
    for path in non_test_sources():
        text = without_test_modules(read(path))
        for n, line in enumerate(text.split("\n"), 1):
            for rx in READS:
                for name in rx.findall(line):
                    if not name.startswith("CARGO_"):  # cargo's own (env!("CARGO_PKG_VERSION"))
                        found.setdefault(name, f"{path}:{n}")
            for rx, name in IMPLICIT:
                if rx.search(line):
                    found.setdefault(name, f"{path}:{n}")
    return found


def check_env():
    documented = set(re.findall(r"`" + NAME + "`", read(CONFIG_DOC)))
    reads = env_reads()
    for name, where in sorted(reads.items(), key=lambda kv: kv[1]):
        if name not in documented:
            problem(where, f"reads the environment variable {name}, which {CONFIG_DOC} does not name (as `{name}`)")
    return len(reads)


# ---------------------------------------------------------------------------------------------
# (b) paths, links and sections named by documents
# ---------------------------------------------------------------------------------------------

def checked_docs():
    return [p for p in tracked("*.md") if not p.startswith("fuzz/")]


TOP = None


def top_level():
    global TOP
    if TOP is None:
        TOP = {p.split("/")[0] for p in tracked() if "/" in p}
    return TOP


FENCE = re.compile(r"^\s*```")
BACKTICK = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
# A path in plain text: a top-level folder, then a file with a known extension.
PLAIN = re.compile(r"(?<![\w/.:<>@-])((?:[\w.-]+/)+[\w.*-]+\.(?:rs|md|sh|sql|toml|yaml|yml|py|json|txt))(?![\w/])")
PATHISH = re.compile(r"^[\w.*<>{}/-]+$")
TEST_REF = re.compile(r"^([\w./*-]+\.rs)::((?:\w+::)*\w+)$")
MODULE_TEST_REF = re.compile(r"^(\w+)::(\w+)$")
SECTION_REF = re.compile(r"((?:docs/)?[\w-]+(?:/[\w-]+)?\.md),? \"([^\"\n]+)\"")


def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_titles = {}


def titles(path):
    """The headings and bold item leads of a Markdown file: (anchors, names)."""
    if path not in _titles:
        anchors, names = set(), set()
        counts = {}
        if os.path.isfile(path):
            for line in read(path).split("\n"):
                m = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
                if m:
                    s = slug(m.group(1))
                    k = counts.get(s, 0)
                    counts[s] = k + 1
                    anchors.add(s if k == 0 else f"{s}-{k}")
                    names.add(re.sub(r"[`*\"]", "", m.group(1)).strip().lower())
                for b in re.findall(r"\*\*([^*]+)\*\*", line):
                    names.add(re.sub(r"[`\"]", "", b).strip().rstrip(".:").lower())
        _titles[path] = (anchors, names)
    return _titles[path]


def exists(path):
    if any(c in path for c in "*?["):
        return bool(glob.glob(path, recursive=True))
    if os.path.exists(path):
        return True
    # A build or run output the docs name (fuzz/target, .dev): ignored by git, made when used.
    return subprocess.run(["git", "check-ignore", "-q", "--no-index", path]).returncode == 0


def repo_path(token):
    """The repository path a token names, or None when it does not look like one."""
    token = token.strip().rstrip(".,;:)")
    token = re.sub(r":\d+(-\d+)?$", "", token)  # file.rs:123
    if "://" in token or token.startswith(("../", "./", "/", "~", "$")) or "/" not in token:
        return None
    if not PATHISH.match(token) or "<" in token or "{" in token:
        return None
    if token.split("/")[0] not in top_level():
        return None
    return token


def check_identifier(where, path, name):
    """`file.rs::name`: the file, or its module folder, holds `name` as an identifier."""
    last = name.split("::")[-1]
    if last.endswith("_") or last == "":
        return
    sources = [path]
    folder = path[:-3]
    if os.path.isdir(folder):
        sources += tracked(f"{folder}/*.rs", f"{folder}/**/*.rs")
    if os.path.basename(path) in ("mod.rs", "lib.rs", "main.rs"):
        sources += tracked(f"{os.path.dirname(path)}/*.rs", f"{os.path.dirname(path)}/**/*.rs")
    word = re.compile(r"\b" + re.escape(last) + r"\b")
    if not any(word.search(read(s)) for s in sources if os.path.isfile(s)):
        problem(where, f"`{path}::{name}`: {path} has no `{last}`")


_by_base = None


def by_basename(base):
    global _by_base
    if _by_base is None:
        _by_base = {}
        for p in tracked("*.rs"):
            _by_base.setdefault(os.path.basename(p), []).append(p)
    return _by_base.get(base, [])


TEST_DIRS = ["tests/tests", "cli/tests"]


def check_code_ref(where, token):
    """`path.rs::name`, `file.rs::name` or `test_file::test_name`."""
    m = TEST_REF.match(token)
    if m:
        path, name = m.groups()
        if "/" in path and path.split("/")[0] not in top_level():
            return True  # relative to a folder named nearby (`ws/auth.rs::admit`)
        if "/" not in path:
            found = by_basename(path)
            if len(found) != 1:
                if not found:
                    problem(where, f"`{token}`: no file {path} in the repository")
                return True
            path = found[0]
        elif not exists(path):
            problem(where, f"`{token}`: {path} does not exist")
            return True
        check_identifier(where, path, name)
        return True
    m = MODULE_TEST_REF.match(token)
    if m and m.group(2).count("_") >= 3:  # a test name is a sentence
        for d in TEST_DIRS:
            path = f"{d}/{m.group(1)}.rs"
            if os.path.isfile(path):
                check_identifier(where, path, m.group(2))
                return True
    return False


def check_link(where, doc, target):
    if re.match(r"^[a-z]+:", target):
        return  # a URL (https:, mailto:)
    path, _, anchor = target.partition("#")
    if path == "":
        path = doc
    else:
        path = os.path.normpath(os.path.join(os.path.dirname(doc), path))
    if path.startswith(".."):
        return  # outside the repository (../shared/...)
    if not exists(path):
        problem(where, f"link to {target}: {path} does not exist")
        return
    if anchor and path.endswith(".md"):
        anchors, _ = titles(path)
        if anchor.lower() not in anchors:
            problem(where, f"link to {target}: {path} has no heading with the anchor #{anchor}")


def design_docs(path):
    """design.md's sections live in docs/design/*.md; its own headings count too."""
    paths = [path]
    if path == "docs/design.md":
        paths += tracked("docs/design/*.md")
    return paths


def check_section(where, doc, ref, title):
    if ref.startswith(("../", "/")):
        return
    path = ref if ref.startswith("docs/") or "/" in ref and os.path.exists(ref) else None
    if path is None:
        candidate = os.path.normpath(os.path.join(os.path.dirname(doc), ref))
        path = candidate if os.path.exists(candidate) else f"docs/{ref}"
    if not os.path.exists(path):
        return  # a missing file is reported by the path check
    want = re.sub(r"[`*\"]", "", title).strip().rstrip(".:").lower()
    for p in design_docs(path):
        _, names = titles(p)
        # A title may be shortened to its first words ("Load" for "Load: buzz-relay and ...").
        if any(n == want or n.startswith(want) and not n[len(want)].isalnum() for n in names):
            return
    problem(where, f'{ref} "{title}": no heading or bold item of that name in {path}'
                   + (" or docs/design/*.md" if path == "docs/design.md" else ""))


def check_doc(doc):
    in_fence = False
    for n, line in enumerate(read(doc).split("\n"), 1):
        where = f"{doc}:{n}"
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        seen = set()
        for target in LINK.findall(line):
            check_link(where, doc, target)
        for ref, title in SECTION_REF.findall(line):
            check_section(where, doc, ref, title)
        if in_fence or doc in HISTORY_DOCS:
            continue
        for span in BACKTICK.findall(line):
            for token in span.split():
                token = token.strip("()[],;\"'")
                if check_code_ref(where, token):
                    seen.add(token.split("::")[0])
                    continue
                path = repo_path(token)
                if path and path not in seen:
                    seen.add(path)
                    if not exists(path):
                        problem(where, f"`{path}` does not exist")
        plain = BACKTICK.sub(" ", LINK.sub(" ", line))
        for token in PLAIN.findall(plain):
            path = repo_path(token)
            if path and path not in seen:
                seen.add(path)
                if not exists(path):
                    problem(where, f"{path} does not exist")


def check_paths():
    docs = checked_docs()
    for doc in docs:
        check_doc(doc)
    return len(docs)


def main():
    n_vars = check_env()
    n_docs = check_paths()
    for p in problems:
        print(p)
    sys.stdout.flush()
    if problems:
        print(f"check-docs: {len(problems)} problem(s): an environment variable missing from {CONFIG_DOC}, "
              "or a path, link or section a document names that does not exist", file=sys.stderr)
        return 1
    print(f"check-docs: {n_vars} environment variables read by the code, all in {CONFIG_DOC}; "
          f"every path, link and section named by {n_docs} documents exists", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
