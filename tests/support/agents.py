"""What agents written by tests are given."""

# The demo's six ticket tools (the demo agent's own list less ``get_ticket_messages``), in the
# order an agent lists them: the order the model is shown them.
DEMO_TOOLS = [
    "get_ticket",
    "search_tickets",
    "update_ticket",
    "notify_user",
    "get_customer",
    "send_external_email",
]
