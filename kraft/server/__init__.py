"""The broker's protocol-neutral service layer (Kafka's KafkaApis / RequestContext split): the
services every listener (HTTP routes, the Kafka protocol) calls, and the request context that
authorization, quotas, request metrics and audit logs take. Nothing here imports `kraft.api`."""
