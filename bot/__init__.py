"""The GitHub face of autoresearch: webhooks, commands, approvals, status comments, PRs.

May import `jobs`; `jobs` never imports this package.
"""
