"""Known Markdown attacks on untrusted text: shared by tests/jobs/test_mdsafe.py, tests/jobs/test_report_untrusted.py and tests/bot/test_markdown_bodies.py."""

ATTACKS = [
    "@octocat please look", "cc @org/team", "fixes #1 and owner/repo#2", "GH-12",
    "[click](https://evil.example/x)", "![pixel](https://evil.example/p.png)", "<https://evil.example>",
    "https://evil.example/a?b=c", "www.evil.example", "mailto:a@b.example", "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>", "<!-- hidden -->", "&#64;octocat", "&commat;octocat", "a`b``c```d",
    "`", "``", " `x` ", "name\n# heading", "x | y | z", "line\r\n- item", "**bold** _it_ ~~s~~",
    "[ref]: https://evil.example", "\\@escaped", "a\\", "<details><summary>x</summary>", "", "   ",
    "\u2028@octocat", "a" * 500, "- item", "1. first", "> quote", "===", "---", "+ x", "* x", "12) x", "  - x",
]
