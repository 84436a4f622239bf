"""The catalogue of profile-guided source transformations (issue 44): how the offline loop changes
a C/C++ library's hot code, not only its flags.

`rewrite` (pure) rewrites one source text where a callgrind profile points: runtime dispatch
(`target_clones`), unroll/ivdep pragmas, software prefetch, inlining the callees its call graph
shows called often for little work, hot/flatten attributes, each refusing
what it cannot parse confidently. `check` builds each rewrite in a scratch copy through the run's
sandbox and keeps it only when it compiles and its function's machine code changes, so no
experiment is spent on a rewrite the compiler ignores. The research phase (`jobs.run.research_phase`)
turns the kept ones into hypotheses; the Claude agent gets the same rewrites as a tool
(`jobs.agent.tools`).

Part of the agents (the offline one applies it through research's generated patches, the model
agent through its tool). May import: jobs.guard, jobs.contract, jobs.research (the profile it
reads).
"""
