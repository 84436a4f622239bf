"""Reporting: pr.md, research.md's sections, the review facts and the Reproduce block.

Pure rendering of a run's typed summary into Markdown, through `jobs.guard.mdsafe` (untrusted text
is escaped by default) and `jobs.guard.shellcmd` (every printed command quoted). May import every
package below the run (guard, contract, stats, measure).
"""
