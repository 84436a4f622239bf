"""The guard: what keeps untrusted repositories, commenters and target code in their place.

Owns the sandbox (bubblewrap and its init), the operator's limits and policy, which paths a
repository may declare, cache backings and per-repository uids, hardened git, safe reads of files
a target wrote, Markdown safety and shell quoting. Everything else stands on it; it imports nothing
of the project outside this package.
"""
