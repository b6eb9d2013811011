"""``signoff demo``: a small notes server shipped with Signoff, and a scripted agent that uses it
through a real ``signoff proxy`` so that a person sees a read, a write waiting for approval and
a destructive call, in a throw-away home."""
