"""What every app of Harness may import: no Django app, no import of any app of ours."""
