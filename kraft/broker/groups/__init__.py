"""Consumer groups (design §8, KIP-848): the pure membership state machine and assignors, the
`__consumer_offsets` record codec, and the asyncio coordinator shell that serves the HTTP routes.

Pure: `hashing`, `assignors`, `membership`, `records`. Shell: `coordinator`.
"""
