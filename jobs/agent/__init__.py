"""Agents turn one hypothesis into one commit in an experiment's worktree."""
