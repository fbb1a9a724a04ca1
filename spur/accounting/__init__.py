"""Accounting logic, pure (no I/O): TRES specs (``tres``), entities and limits (``model``), the
sacctmgr grammar and tables (``grammar``), running-limit evaluation (``limits``), decayed usage and
fair share (``fairshare``), multifactor priority (``priority``) and the sshare/sprio rows
(``shares``). The replicated state that holds the entities is ``spur.state.accounting``.
"""
