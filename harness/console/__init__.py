"""The admin console: Harness's admin site (``site``), the model admins (``admin``), the
pages beyond Django's (``views``), the reads they show (``reads``), the console's permissions
(``permissions``) and its sign-in throttling (``login``). ``apps`` installs the site as the
``admin`` app."""
