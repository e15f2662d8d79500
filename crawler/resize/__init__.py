"""`crawler resize`: a crawl stopped with N nodes goes on with M.

Every host whose owner changes moves to its new owner with its queued URLs,
its politeness state (when it may next be contacted, its address, its
response-time estimates) and the seen URLs of its URLs, over the peer
protocol: nodes may be on different machines with no shared disk. Run on
every machine of both clusters while the crawl is stopped, then start the
new cluster as usual; it resumes. plan.py says who takes part in which role,
outgoing.py what a sender hands over, records.py how it travels and is
staged, participant.py the exchange, apply.py the local step that ends it,
cli.py the command. docs/operations.md has the operator's steps.
"""
