from django.contrib import admin

from tools.demo.models import Customer, Notification, OutboxEmail, SupportQueue, Ticket


@admin.register(Ticket)
class TicketAdmin(admin.ModelAdmin):
    list_display = ["ticket_id", "tenant", "title", "queue", "status", "assignee_id", "sla_due"]
    list_filter = ["tenant", "status", "queue"]
    search_fields = ["ticket_id", "title"]


@admin.register(SupportQueue)
class SupportQueueAdmin(admin.ModelAdmin):
    list_display = ["tenant", "name", "on_call_agent_id"]


@admin.register(Customer)
class CustomerAdmin(admin.ModelAdmin):
    list_display = ["customer_id", "tenant", "name"]


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ["recipient_id", "ticket_id", "tenant", "created_at"]


@admin.register(OutboxEmail)
class OutboxEmailAdmin(admin.ModelAdmin):
    list_display = ["to", "subject", "tenant", "created_at"]
