"""stead: durable LLM agent runs."""
