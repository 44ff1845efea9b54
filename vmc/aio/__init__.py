"""asyncio drivers: the proxy, a paced test origin and the upstream HTTP/1.1 client (h11)."""
