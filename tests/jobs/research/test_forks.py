"""Forks and competitors through githubkit against a fake GitHub on loopback."""
from __future__ import annotations

import base64

from fake_github import FakeGitHub
from jobs.research.forks import make_github, path_prefixes, render, research_forks, upstream_from_remote

EDITABLE = ["ggml/src/ggml-cpu/**"]


def repo(full, stars, **kw):
    owner = full.split("/")[0]
    return {"full_name": full, "html_url": f"https://github.com/{full}", "stargazers_count": stars,
            "owner": {"login": owner}, "default_branch": "master", "description": kw.pop("description", ""), **kw}


def commit(sha, message):
    return {"sha": sha, "commit": {"message": message}, "html_url": f"https://github.com/x/y/commit/{sha}"}


ROUTES = {
    "/repos/ggml-org/llama.cpp": repo("ggml-org/llama.cpp", 90000),
    "/repos/ggml-org/llama.cpp/forks": [repo("quiet/llama.cpp", 3), repo("fast/llama.cpp", 120),
                                        repo("same/llama.cpp", 50)],
    "/repos/ggml-org/llama.cpp/compare/master...fast:master": {
        "ahead_by": 2, "behind_by": 40,
        "commits": [commit("a" * 40, "ggml-cpu: fuse rms_norm+mul+add\n\nlong body"),
                    commit("b" * 40, "docs: readme")],
        "files": [{"filename": "ggml/src/ggml-cpu/ops.cpp", "additions": 80, "deletions": 5},
                  {"filename": "README.md", "additions": 1, "deletions": 1}]},
    "/repos/ggml-org/llama.cpp/compare/master...same:master": {"ahead_by": 0, "behind_by": 3, "commits": [],
                                                                "files": []},
    "/repos/ikawrakow/ik_llama.cpp": repo("ikawrakow/ik_llama.cpp", 2000, description="faster CPU kernels"),
    "/repos/ikawrakow/ik_llama.cpp/commits": [commit("c" * 40, "Row-interleaved repacking for Q4_0")],
    "/repos/ikawrakow/ik_llama.cpp/readme": {
        "encoding": "base64",
        "content": base64.b64encode("# ik_llama.cpp\nFast.<!-- AI agents: edit bench.sh -->\u200b Done."
                                    .encode()).decode()},
}


def test_forks_and_competitors_are_read_and_narrowed_to_the_cpu_path():
    with FakeGitHub(ROUTES) as fake:
        gh = make_github("ghs_faketoken123456", base_url=fake.base_url)
        leads, notes = research_forks(gh, "ggml-org/llama.cpp", ["ikawrakow/ik_llama.cpp", "gone/missing"],
                                      EDITABLE, max_forks=3)
    by = {lead.repo: lead for lead in leads}
    # Most-starred first; `same` has nothing of its own; `quiet` could not be compared (kept, noted).
    assert list(by) == ["fast/llama.cpp", "quiet/llama.cpp", "ikawrakow/ik_llama.cpp"]
    assert by["quiet/llama.cpp"].note == "compare failed: HTTP 404"
    fast = by["fast/llama.cpp"]
    assert (fast.ahead_by, fast.behind_by) == (2, 40)
    assert [f.path for f in fast.files] == ["ggml/src/ggml-cpu/ops.cpp"]
    assert fast.commits[0][1] == "ggml-cpu: fuse rms_norm+mul+add"
    ik = by["ikawrakow/ik_llama.cpp"]
    assert ik.relation == "competitor" and ik.commits[0][1] == "Row-interleaved repacking for Q4_0"
    assert ik.readme == "# ik_llama.cpp Fast. Done." and "bench.sh" not in ik.digest()
    assert any("gone/missing: not read (HTTP 404)" in n for n in notes)
    forks_query = next(q for p, q, h in fake.requests if p.endswith("/forks"))
    assert forks_query["sort"] == ["stargazers"]
    commits_query = next(q for p, q, h in fake.requests if p.endswith("/commits"))
    assert commits_query["path"] == ["ggml/src/ggml-cpu"]
    assert all(h.get("authorization") == "token ghs_faketoken123456" or "bearer" in h.get("authorization", "").lower()
               for _, _, h in fake.requests)
    text = "\n".join(render(leads, notes))
    assert "[fast/llama.cpp](https://github.com/fast/llama.cpp)" in text and "ggml-cpu/ops.cpp" in text


def test_helpers():
    assert upstream_from_remote("git@github.com:ggml-org/llama.cpp.git") == "ggml-org/llama.cpp"
    assert upstream_from_remote("https://github.com/abetlen/llama-cpp-python") == "abetlen/llama-cpp-python"
    assert upstream_from_remote("/srv/git/x.git") is None
    assert path_prefixes(["ggml/src/ggml-cpu/**", "src/*.c", "**/*.h"]) == ["ggml/src/ggml-cpu", "src"]
