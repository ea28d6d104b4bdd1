"""The console's own permissions, beside the per-model ones Django derives."""

# Deciding a held call from a run's page needs what deciding it on the approvals page needs:
# the right to change approvals in the admin, the run's tenant granted, and (checked by the
# approval service) ``approval:decide`` for the staff user in that tenant's policy.
DECIDE_PERMISSION = "policy.change_toolapproval"
