"""The research pipeline: config, research, agent, experiments, statistics, reports.

Runs inside RQ workers, the CLI and the GitHub Action alike. Knows nothing of Flask or
webhooks; `bot/` imports this package, never the reverse.
"""
