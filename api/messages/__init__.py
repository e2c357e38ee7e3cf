"""Every request body and answer of the HTTP API, defined once as msgspec Structs, one module per
message family: the routes decode bodies with them (`api/wire.py`: JSON or msgpack, binary as
base64 or bin), and the OpenAPI document (`api/openapi.py`) is generated from them.

Answers are encoded from these Structs; an answer field with a default is left out while it holds
the default (`omit_defaults`), so "required" in the schema means "always present". Answers built by
the node's services (groups, the controller) are dicts of the same shape, which the route tests
check against these Structs.
"""
