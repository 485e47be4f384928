"""What the Messages API does with a request: server-side context editing (the
``context_management`` edits and their application, tool-result clearing in a replay), the
preserved-thinking check, the thinking it counts, and the prompt cache's price."""
