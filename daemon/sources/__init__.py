"""Where text comes from: the web (SearXNG, fetch, egress), the library, ZIM archives, extraction."""
