"""Mutations of the store, the chain, canonical JSON, the gate and the crash rules."""

from __future__ import annotations

from tests.mutants.mutation import Mutation

CORE: tuple[Mutation, ...] = (
    # --- G-STORE-1: owner-only ----------------------------------------------------------------
    Mutation(
        "a new database is created readable by others",
        "G-STORE-1",
        "core/store.py",
        "os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)",
        "os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)",
        "the file and its WAL (which SQLite makes with the file's mode) are readable by all",
        "tests/core/test_store.py::test_a_new_database_and_its_wal_are_owner_only_whatever_the_umask",
    ),
    Mutation(
        "the WAL is not looked at on open",
        "G-STORE-1",
        "core/store.py",
        'for side in (path, path.with_name(path.name + "-wal"),'
        ' path.with_name(path.name + "-shm")):',
        'for side in (path, path.with_name(path.name + "-shm")):',
        "a WAL that others can write, or that belongs to another user, is opened",
        "tests/core/test_store.py::test_a_wal_file_others_can_write_is_refused",
    ),
    # --- G-FILES-1: Signoff's own files ----------------------------------------------------------
    Mutation(
        "the folders above a new one get the umask's mode",
        "G-FILES-1",
        "core/private_files.py",
        "    for folder in reversed(missing):\n",
        "    path.mkdir(mode=0o700, parents=True, exist_ok=True)\n    for folder in ():\n",
        "the data folder made through the configuration's folder is open to everyone",
        "tests/core/test_private_files.py::"
        "test_every_level_of_a_folder_made_is_owner_only_whatever_the_umask",
    ),
    Mutation(
        "an alarm file that does not read is no alarm",
        "G-FILES-1",
        "core/witness.py",
        '                False, None, f"the alarm file cannot be read ({why}) [AlarmFile]", 0',
        '                False, None, "", 0',
        "a folder an agent made at alarm.json keeps the tray green",
        "tests/core/test_private_files.py::"
        "test_an_alarm_file_that_is_not_signoffs_raises_the_alarm[folder]",
    ),
    Mutation(
        "a state file its group can write is taken",
        "G-FILES-1",
        "core/private_files.py",
        "if modes and st.st_mode & 0o022:",
        "if modes and st.st_mode & 0o002:",
        "a state file or folder writable by its group (0o620, 0o770) is trusted",
        "tests/core/test_private_files.py::"
        "test_a_state_file_its_group_alone_or_others_alone_can_write_is_refused[0o620]",
    ),
    Mutation(
        "a state file others can write is taken",
        "G-FILES-1",
        "core/private_files.py",
        "if modes and st.st_mode & 0o022:",
        "if modes and st.st_mode & 0o020:",
        "a state file or folder writable by others but not its group (0o602, 0o707) is trusted",
        "tests/core/test_private_files.py::"
        "test_a_state_file_its_group_alone_or_others_alone_can_write_is_refused[0o602]",
    ),
    Mutation(
        "another user's state file is taken",
        "G-FILES-1",
        "core/private_files.py",
        "    if st.st_uid != os.geteuid():\n",
        "    if False:  # whoever owns it\n",
        "an owner-only file or folder of another user is trusted",
        "tests/core/test_private_files.py::"
        "test_a_state_file_alarm_or_folder_of_another_user_is_refused_even_when_owner_only",
    ),
    # --- G-FILES-3: sockets where their paths fit ----------------------------------------------
    Mutation(
        "a socket's path is never measured",
        "G-FILES-3",
        "core/wake.py",
        '    if not hasattr(os, "geteuid") or _fits(natural):',
        "    if True:",
        "with a deep SIGNOFF_HOME the app cannot bind its sockets and will not start",
        "tests/core/test_wake.py::"
        "test_a_home_too_deep_for_a_socket_is_woken_through_a_folder_where_every_socket_fits",
    ),
    Mutation(
        "two homes share one fallback folder",
        "G-FILES-3",
        "core/wake.py",
        "hashlib.sha256(os.fsencode(os.path.realpath(natural)))",
        "hashlib.sha256(os.fsencode(natural.name))",
        "two deep homes share one socket folder: one app hands over to the other's, and their"
        " wakes cross",
        "tests/core/test_wake.py::"
        "test_two_homes_too_deep_for_a_socket_never_share_a_folder_and_one_home_is_one_folder",
    ),
    Mutation(
        "the folder holding a fallback is not checked",
        "G-FILES-3",
        "core/wake.py",
        "        private_files.make_dir(folder.parent)\n",
        "        pass\n",
        "another account's /tmp/signoff-UID holds the app's sockets: it can swap the folder",
        "tests/core/test_wake.py::"
        "test_a_fallback_folder_not_the_users_own_private_one_is_refused_by_name[holder-another-users]",
    ),
    Mutation(
        "the app makes its natural run folder, not the one its sockets are in",
        "G-FILES-3",
        "app/main.py",
        "            wake.make_runtime_dir()\n",
        "            private_files.make_dir(wake.natural_runtime_dir())\n",
        "with a deep SIGNOFF_HOME the app cannot listen for a second start and will not start",
        "tests/app/test_instance_and_autostart.py::"
        "test_an_app_on_a_home_too_deep_for_a_socket_starts_hands_over_and_is_woken",
    ),
    # --- G-STORE-2: no triggers, no views -----------------------------------------------------
    Mutation(
        "a view in the file is let through",
        "G-STORE-2",
        "core/store.py",
        "WHERE type IN ('trigger', 'view')",
        "WHERE type IN ('trigger')",
        "a view, which could show the operator rows Signoff never wrote, is opened",
        "tests/core/test_store.py::test_a_trigger_or_a_view_in_the_file_is_refused[view]",
    ),
    Mutation(
        "a schema change under an open store is not looked at",
        "G-STORE-2",
        "core/store.py",
        "            _refuse_foreign_objects(self._conn, self.path)\n"
        "            self._schema_version = version",
        "            self._schema_version = version",
        "a trigger created while the store is open rewrites what the next write writes",
        "tests/core/test_store.py::test_a_trigger_added_while_the_store_is_open_stops_the_next_write",
    ),
    # --- G-STORE-3: not ours, not touched -----------------------------------------------------
    Mutation(
        "a newer schema is refused only when verifying",
        "G-STORE-3",
        "core/store.py",
        "    if version > LATEST:\n        raise SchemaTooNew(",
        "    if version > LATEST and readonly:\n        raise SchemaTooNew(",
        "a database a newer Signoff wrote is opened for writing by this older one",
        "tests/core/test_store.py::test_a_database_from_a_newer_signoff_is_refused",
    ),
    Mutation(
        "someone else's database is migrated into",
        "G-STORE-3",
        "core/store.py",
        "            if current == 0 and _has_tables(conn):\n",
        "            if current < 0 and _has_tables(conn):\n",
        "Signoff's tables are created inside another program's SQLite database",
        "tests/core/test_store.py::test_someone_elses_sqlite_database_is_refused_not_migrated",
    ),
    # --- G-STORE-4: nothing half-written, errors named ----------------------------------------
    Mutation(
        "a failed transaction commits what it wrote",
        "G-STORE-4",
        "core/store.py",
        '                conn.execute("ROLLBACK")\n            raise\n'
        "        for relay in self.observers:\n",
        '                conn.execute("COMMIT")\n            raise\n'
        "        for relay in self.observers:\n",
        "a transaction that raised halfway leaves its first writes in the database",
        "tests/core/test_store.py::test_a_failed_transaction_leaves_nothing",
    ),
    Mutation(
        "a busy database is not named",
        "G-STORE-4",
        "core/store.py",
        'startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))',
        'startswith(("SQLITE_LOCKED",))',
        "a lock held past the busy timeout surfaces as a bare sqlite3 error, not StoreBusy",
        "tests/core/test_store.py::test_a_write_lock_held_past_the_busy_timeout_is_named",
    ),
    # --- G-JSON-1: lossy JSON refused by name -------------------------------------------------
    Mutation(
        "a duplicate key is kept, the last one winning",
        "G-JSON-1",
        "core/canonical.py",
        "    obj = dict(pairs)\n    if len(obj) != len(pairs):",
        "    obj = dict(pairs)\n    if len(obj) > len(pairs):",
        "two readers of the same text can disagree on which value a duplicated key has",
        'tests/core/test_canonical.py::test_duplicate_keys_are_refused[{"a":1,"a":2}]',
    ),
    Mutation(
        "2^53 passes as a safe integer",
        "G-JSON-1",
        "core/canonical.py",
        "or not -MAX_SAFE_INTEGER <= int(text) <= MAX_SAFE_INTEGER\n",
        "or not -MAX_SAFE_INTEGER - 1 <= int(text) <= MAX_SAFE_INTEGER + 1\n",
        "±2^53, which a double cannot tell from 2^53+1, is accepted and hashed",
        "tests/core/test_canonical.py::test_integers_outside_the_safe_range_are_refused[9007199254740992]",
    ),
    # --- G-CHAIN-1: edits, deletions, insertions found ----------------------------------------
    Mutation(
        "verify stops after its first page",
        "G-CHAIN-1",
        "core/verify.py",
        "        after = rows[-1][0]\n        if progress",
        "        after = end\n        if progress",
        "an edit past the first 5,000 events is never read, so never detected",
        "tests/core/test_tamper.py::test_an_edit_past_the_first_page_verify_reads_is_found",
    ),
    Mutation(
        "a gap in the sequence is not looked for",
        "G-CHAIN-1",
        "core/chain.py",
        "                if seq != expected:\n                    raise EventMissing(",
        "                if seq < expected:\n                    raise EventMissing(",
        "a deleted event is not named as missing (the next one is blamed, as altered)",
        "tests/core/test_tamper.py::test_each_tampering_is_detected_by_the_library[event-deleted-in-the-middle]",
    ),
    # --- G-CHAIN-2: against the kept head -----------------------------------------------------
    Mutation(
        "a log one event short of the kept head passes",
        "G-CHAIN-2",
        "core/chain.py",
        "if w is not None and self._head.seq < w.seq:",
        "if w is not None and self._head.seq < w.seq - 1:",
        "deleting the last event, the one the keyring witnessed, goes unnoticed",
        "tests/core/test_tamper.py::test_each_tampering_is_detected_by_the_library[the-kept-head's-own-event-deleted]",
    ),
    Mutation(
        "the kept head's hash is not compared",
        "G-CHAIN-2",
        "core/chain.py",
        "if seq == w_seq and stored != w_hash:",
        "if seq == w_seq and computed != stored:",
        "a log rewritten with recomputed hashes, or an older copy written on, verifies",
        "tests/core/test_tamper.py::test_each_tampering_is_detected_by_the_library[older-copy-written-past-the-kept-head]",
    ),
    # --- G-GATE-1: exactly the request granted, once ------------------------------------------
    Mutation(
        "approve ignores --hash",
        "G-GATE-1",
        "core/proxy/approval_commands.py",
        "                        expected_hash=args.hash, scope=scope)  # fmt: skip\n",
        "                        expected_hash=None, scope=scope)  # fmt: skip\n",
        "`signoff approve ID --hash H` decides even when H is not the request's hash",
        "tests/core/test_cli.py::test_a_decision_given_any_hash_but_the_request_hash_is_refused_and_decides_nothing",
    ),
    Mutation(
        "the approval hash leaves out the arguments",
        "G-GATE-1",
        "core/approvals.py",
        '        "tool": tool,\n        "arguments": arguments,\n        "run": run_id,\n',
        '        "tool": tool,\n        "run": run_id,\n',
        "an approval granted for one call's arguments binds any arguments to that tool",
        "tests/core/test_approvals.py::test_the_approval_hash_is_over_the_canonical_request",
    ),
    Mutation(
        "the approval hash leaves out the run",
        "G-GATE-1",
        "core/approvals.py",
        '        "run": run_id,\n        "step": step,\n        "kind": kind,\n',
        '        "step": step,\n        "kind": kind,\n',
        "the hash shown for one run's request also approves the same request in another run",
        "tests/core/test_approvals.py::test_the_approval_hash_is_over_the_canonical_request",
    ),
    Mutation(
        "the approval hash leaves out the tool spec",
        "G-GATE-1",
        "core/approvals.py",
        '        "tool_spec": spec_hash,\n        "tool": tool,\n',
        '        "tool": tool,\n',
        "a request rewritten to another tool spec after its approval keeps the approved hash",
        "tests/core/test_approvals.py::"
        "test_a_request_rewritten_in_any_field_its_hash_covers_after_its_approval_runs_nothing"
        "[tool_spec]",
    ),
    Mutation(
        "the approval hash leaves out the tool",
        "G-GATE-1",
        "core/approvals.py",
        '        "tool_spec": spec_hash,\n        "tool": tool,\n',
        '        "tool_spec": spec_hash,\n',
        "a request rewritten to another tool after its approval keeps the approved hash",
        "tests/core/test_approvals.py::"
        "test_a_request_rewritten_in_any_field_its_hash_covers_after_its_approval_runs_nothing"
        "[tool]",
    ),
    Mutation(
        "the approval hash leaves out the kind",
        "G-GATE-1",
        "core/approvals.py",
        '        "step": step,\n        "kind": kind,\n',
        '        "step": step,\n',
        "an approval rewritten to another kind after it was given keeps the approved hash",
        "tests/core/test_approvals.py::"
        "test_a_request_rewritten_in_any_field_its_hash_covers_after_its_approval_runs_nothing"
        "[kind]",
    ),
    Mutation(
        "attach does not check the grant still binds its request",
        "G-GATE-1",
        "core/waiting.py",
        "    approvals.check_binding(approval, step, None)\n    granted = authenticated(",
        "    granted = authenticated(",
        "arguments edited in the record after the grant are executed",
        "tests/core/test_approvals.py::test_an_approval_edited_after_it_was_granted_does_not_execute",
    ),
    Mutation(
        "a grant is not claimed at attach",
        "G-GATE-1",
        "core/waiting.py",
        "            tx.execute(\n"
        '                "UPDATE runs SET lease_owner = ?, lease_expires_at = ? WHERE id = ?",\n'
        "                (gate.owner, gate._lease_expiry(), s.run_id),\n"
        "            )\n",
        "            pass\n",
        "two sessions attaching one grant are both let through to execute it",
        "tests/core/test_approvals.py::test_two_gates_attaching_one_grant_execute_it_once",
    ),
    # --- G-GATE-2: unclassified unavailable, mutations pause, invalid decisions run nothing ---
    Mutation(
        "a local mutation is allowed by default",
        "G-GATE-2",
        "core/policy/policy.py",
        "    SideEffect.LOCAL_MUTATION: Rule.APPROVE,",
        "    SideEffect.LOCAL_MUTATION: Rule.ALLOW,",
        "a mutating tool runs with no approval when the operator set no rule",
        "tests/core/test_gate.py::test_by_default_a_mutation_of_every_class_pauses_the_run_on_an_approval_of_its_class[local]",
    ),
    Mutation(
        "arguments are not checked against the schema",
        "G-GATE-2",
        "core/proposal.py",
        "    errors = tool.schema_errors(arguments)\n    if errors:\n"
        '        return Plan(invalid="the arguments do not match the schema: "',
        "    errors: list[str] = []\n    if errors:\n"
        '        return Plan(invalid="the arguments do not match the schema: "',
        "a decision whose arguments fail the tool's schema is put to the policy and may run",
        "tests/core/test_gate.py::test_an_invalid_decision_is_recorded_verbatim_and_denied[wrong-type]",
    ),
    # --- G-GATE-3: a lapsed grant runs nothing ------------------------------------------------
    Mutation(
        "a grant's age at attach ignores whole days",
        "G-GATE-3",
        "core/waiting.py",
        "if ttl is not None and (now - decided).total_seconds() >= ttl:",
        "if ttl is not None and (now - decided).seconds >= ttl:",
        "a grant days past its TTL is judged by the seconds past the last whole day, and runs",
        "tests/core/test_approvals.py::test_a_grant_attached_days_after_it_was_granted_is_past_an_hours_ttl",
    ),
    Mutation(
        "execute does not judge the grant's TTL again",
        "G-GATE-3",
        "core/execution.py",
        "    if grant is not None:\n        _check_grant_ttl(s, state.index, grant, now, at)\n",
        "",
        "a grant that lapses between attach and execute is executed",
        "tests/core/test_approvals.py::test_a_grant_that_expires_between_attach_and_execute_runs_nothing",
    ),
    # --- G-GATE-4: the policy asked again on attach -------------------------------------------
    Mutation(
        "attach ignores the policy's new answer",
        "G-GATE-4",
        "core/waiting.py",
        "    outcome = decision.outcome\n    if outcome is Outcome.APPROVE and (",
        "    outcome = Outcome.ALLOW\n    if outcome is Outcome.APPROVE and (",
        "a grant runs although the policy now denies, aborts or asks for another approval",
        "tests/core/test_approvals.py::test_a_changed_policy_re_pauses_on_attach_and_a_reject_then_cancels",
    ),
    Mutation(
        "an approval of any kind lets a grant through",
        "G-GATE-4",
        "core/waiting.py",
        "        decision.kind == approval.kind or approval.kind in OPERATOR_KINDS\n",
        "        decision.kind or approval.kind in OPERATOR_KINDS\n",
        "a policy that now asks for a different approval (a second look) does not re-pause",
        "tests/core/test_approvals.py::test_a_changed_policy_re_pauses_on_attach_and_a_reject_then_cancels",
    ),
    # --- G-GATE-5: misuse refused -------------------------------------------------------------
    Mutation(
        "a second proposal of one step is accepted",
        "G-GATE-5",
        "core/proposal.py",
        "        if state.proposed:\n            raise RunStateError(",
        "        if False:\n            raise RunStateError(",
        "a step already decided is decided again, and a second request can reach execute",
        "tests/core/test_gate.py::test_proposing_twice_and_executing_twice_are_refused",
    ),
    Mutation(
        "attach takes over a live lease",
        "G-GATE-5",
        "core/takeover.py",
        "    if is_live(run.lease_owner, run.lease_expires_at, gate.config.wall_clock()):\n"
        '        raise RunLeased(f"run {run.id} is leased to {run.lease_owner}, live")\n',
        "",
        "a run another live session is executing is taken from it",
        "tests/core/test_gate.py::test_attach_of_a_run_another_gate_leases_live_is_refused",
    ),
    # --- G-GATE-6: a standing grant binds the exact call, signed -------------------------------
    Mutation(
        "a grant's MAC is not checked",
        "G-GATE-6",
        "core/grants.py",
        '    sent = payload.get("mac")\n    if sent is None:\n',
        '    sent = payload.get("mac")\n    return None\n    if sent is None:\n',
        "a grant row and event written by whoever can write Signoff's files allow a call",
        "tests/core/test_grants.py::test_a_grant_edited_to_name_another_host_is_not_honoured",
    ),
    Mutation(
        "a grant's MAC comparison accepts a prefix",
        "G-GATE-6",
        "core/grants.py",
        "operator_key.mac_matches(\n        sent, expected\n    )",
        "expected.startswith(str(sent))",
        "a grant whose MAC a database writer emptied, under the real key id, allows its call",
        "tests/core/test_grants.py::"
        "test_a_grant_whose_mac_is_forged_under_the_real_key_id_is_not_honoured[empty]",
    ),
    Mutation(
        "the MAC comparison ignores case (grants)",
        "G-GATE-6",
        "core/operator_key.py",
        '    return hmac.compare_digest(sent.encode("utf-8", "surrogatepass"),'
        " expected.encode())\n",
        "    return sent.lower() == expected\n",
        "a grant's MAC rewritten in capitals is taken for the right one",
        "tests/core/test_grants.py::"
        "test_a_grant_whose_mac_is_forged_under_the_real_key_id_is_not_honoured[in capitals]",
    ),
    Mutation(
        "the call hash leaves out the pinned spec",
        "G-GATE-6",
        "core/approvals.py",
        'return canonical.sha256_hex({"tool_spec": spec_hash, "tool": tool, "arguments":'
        " arguments})",
        'return canonical.sha256_hex({"tool": tool, "arguments": arguments})',
        "a grant survives a re-pin of its tool with a reworded description",
        "tests/core/test_grants.py::"
        "test_a_grant_covers_no_call_that_differs_in_what_its_call_hash_or_host_covers"
        "[pinned spec]",
    ),
    Mutation(
        "the call hash leaves out the arguments",
        "G-GATE-6",
        "core/approvals.py",
        'return canonical.sha256_hex({"tool_spec": spec_hash, "tool": tool, "arguments":'
        " arguments})",
        'return canonical.sha256_hex({"tool_spec": spec_hash, "tool": tool})',
        "a grant given for one call's arguments allows the tool with any arguments",
        "tests/core/test_grants.py::"
        "test_a_grant_covers_no_call_that_differs_in_what_its_call_hash_or_host_covers[arguments]",
    ),
    Mutation(
        "a grant's MAC leaves out its grant",
        "G-GATE-6",
        "core/grants.py",
        '        "grant": grant.id,\n',
        "",
        "a grant edited in its grant (row and record alike) is honoured",
        "tests/core/test_grants.py::"
        "test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured[grant]",
    ),
    Mutation(
        "a grant's MAC leaves out its approval",
        "G-GATE-6",
        "core/grants.py",
        '        "approval": grant.approval_id,\n',
        "",
        "a grant edited in its approval (row and record alike) is honoured",
        "tests/core/test_grants.py::"
        "test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured[approval]",
    ),
    Mutation(
        "a grant's MAC leaves out its run",
        "G-GATE-6",
        "core/grants.py",
        '        "run": grant.run_id,\n',
        "",
        "a grant edited in its run (row and record alike) is honoured",
        "tests/core/test_grants.py::"
        "test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured[run]",
    ),
    Mutation(
        "a grant's MAC leaves out its step",
        "G-GATE-6",
        "core/grants.py",
        '        "step": grant.step,\n',
        "",
        "a grant edited in its step (row and record alike) is honoured",
        "tests/core/test_grants.py::"
        "test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured[step]",
    ),
    Mutation(
        "a grant's MAC leaves out its call_hash",
        "G-GATE-6",
        "core/grants.py",
        '        "call_hash": grant.call_hash,\n',
        "",
        "a grant edited in its call_hash (row and record alike) is honoured",
        "tests/core/test_grants.py::"
        "test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured[call_hash]",
    ),
    Mutation(
        "a grant's MAC leaves out its server",
        "G-GATE-6",
        "core/grants.py",
        '        "server": grant.server,\n',
        "",
        "a grant edited in its server (row and record alike) is honoured",
        "tests/core/test_grants.py::"
        "test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured[server]",
    ),
    Mutation(
        "a grant's MAC leaves out its tool",
        "G-GATE-6",
        "core/grants.py",
        '        "tool": grant.tool,\n',
        "",
        "a grant edited in its tool (row and record alike) is honoured",
        "tests/core/test_grants.py::"
        "test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured[tool]",
    ),
    Mutation(
        "a grant's MAC leaves out its scope",
        "G-GATE-6",
        "core/grants.py",
        '        "scope": grant.scope,\n',
        "",
        "a grant edited in its scope (row and record alike) is honoured",
        "tests/core/test_grants.py::"
        "test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured[scope]",
    ),
    Mutation(
        "a grant's MAC leaves out its until",
        "G-GATE-6",
        "core/grants.py",
        '        "until": grant.until,\n',
        "",
        "a grant edited in its until (row and record alike) is honoured",
        "tests/core/test_grants.py::"
        "test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured[until]",
    ),
    Mutation(
        "a grant's MAC leaves out its app_session",
        "G-GATE-6",
        "core/grants.py",
        '        "app_session": grant.app_session,\n',
        "",
        "a grant edited in its app_session (row and record alike) is honoured",
        "tests/core/test_grants.py::"
        "test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured[app_session]",
    ),
    Mutation(
        "a grant's MAC leaves out its by",
        "G-GATE-6",
        "core/grants.py",
        '        "by": grant.by,\n',
        "",
        "a grant edited in its by (row and record alike) is honoured",
        "tests/core/test_grants.py::"
        "test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured[by]",
    ),
    Mutation(
        "a grant's MAC leaves out its at",
        "G-GATE-6",
        "core/grants.py",
        '        "at": grant.at,\n',
        "",
        "a grant edited in its at (row and record alike) is honoured",
        "tests/core/test_grants.py::"
        "test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured[at]",
    ),
    Mutation(
        "a grant's MAC leaves out its reason",
        "G-GATE-6",
        "core/grants.py",
        '        "reason": grant.reason,\n',
        "",
        "a grant edited in its reason (row and record alike) is honoured",
        "tests/core/test_grants.py::"
        "test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured[reason]",
    ),
    Mutation(
        "a grant's MAC leaves out its host_label",
        "G-GATE-6",
        "core/grants.py",
        '        "host_label": grant.host_label,\n',
        "",
        "a grant edited in its host_label (row and record alike) is honoured",
        "tests/core/test_grants.py::"
        "test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured[host_label]",
    ),
    Mutation(
        "a grant's revocation in the chain is not read",
        "G-GATE-6",
        "core/grants.py",
        '            return f"grant {grant.id} was ended (event {seq})"\n',
        "            continue\n",
        "a grant ended by the operator or the app quitting allows again once its row is reset",
        "tests/core/test_grants.py::test_a_grant_whose_end_was_moved_or_revocation_undone_is_not_honoured",
    ),
    Mutation(
        "a grant runs a call that may have run",
        "G-GATE-6",
        "core/proxy/rules.py",
        " and grant is not None and not self.may_have_run:",
        " and grant is not None:",
        "an identical call whose predecessor's outcome is unknown runs again without the operator",
        "tests/core/test_grants.py::test_a_grant_yields_the_duplicate_rule_but_not_a_call_that_may_have_run",
    ),
    Mutation(
        "a grant stands over a deny",
        "G-GATE-6",
        "core/proxy/rules.py",
        "        if decision.outcome is Outcome.APPROVE and grant is not None",
        "        if decision.outcome is not Outcome.ABORT and grant is not None",
        "a call the operator's policy denies runs under a grant given for it before the deny",
        "tests/core/test_grants.py::test_a_grant_never_overrides_a_deny",
    ),
    Mutation(
        "a grant stands over an abort",
        "G-GATE-6",
        "core/proxy/rules.py",
        "        if decision.outcome is Outcome.APPROVE and grant is not None",
        "        if decision.outcome is not Outcome.DENY and grant is not None",
        "a policy that ends the run is overridden by the operator's grant, and the call runs",
        "tests/core/test_grants.py::test_a_grant_never_overrides_an_abort",
    ),
    Mutation(
        "a grant stands over the own-files rule",
        "G-GATE-6",
        "core/proxy/rules.py",
        "        if decision.kind == OWN_FILES_KIND:  # says what it touches: the stronger word\n"
        "            return decision\n",
        "",
        "the identical call with a path into Signoff's configuration runs under the grant, unasked",
        "tests/core/test_grants.py::test_a_grant_never_overrides_the_rule_for_signoffs_own_files",
    ),
    Mutation(
        "a grant is honoured on a database cut back before its end",
        "G-GATE-6",
        "core/grants.py",
        "            if kept is not None:  # the chain from the first grant made on holds the kept"
        " head\n",
        "            if False:\n",
        "an agent deletes a grant's revocation from the database and the call runs unasked again",
        "tests/core/test_grants.py::"
        "test_an_end_cut_off_the_chain_brings_no_grant_back_once_the_end_is_kept",
    ),
    Mutation(
        "a grant covers an unknown outcome once it is past the window",
        "G-GATE-6",
        "core/proxy/server.py",
        " and completed is not None and completed[1] and not may_have_run:",
        " and False:",
        "a call cut off with its outcome unknown runs again under the grant ten minutes later",
        "tests/proxy/test_grants.py::"
        "test_a_call_whose_predecessor_may_have_run_asks_under_a_grant_past_the_window",
    ),
    # --- G-MODEL-1..3: model calls, their limits, prices and charges ---------------------------
    Mutation(
        "a model call is judged on what was spent, not on its projection",
        "G-MODEL-1",
        "core/limits.py",
        "        if most is not None and (used > most if projected else used >= most):\n",
        "        if most is not None and not projected and used >= most:\n",
        "a call that would pass the token limit is recorded as started, and the loop sends it",
        "tests/core/test_model_calls.py::"
        "test_a_call_whose_projection_passes_the_token_limit_is_refused_and_nothing_is_sent",
    ),
    Mutation(
        "an answer's reported output is believed past what its call allowed",
        "G-MODEL-1",
        "core/model_calls.py",
        """        elif _count(tokens_out, "tokens_out") > most:\n""",
        """        elif _count(tokens_out, "tokens_out") < 0:\n""",
        "an answer claiming more output than the projection allowed passes the run's limit",
        "tests/core/test_model_calls.py::"
        "test_an_answer_of_more_output_than_the_call_allowed_cannot_pass_the_limit",
    ),
    Mutation(
        "an unknown model is priced at zero",
        "G-MODEL-2",
        "core/prices.py",
        "        found = self.by_model.get((provider, model))\n",
        "        found = self.by_model.get((provider, model), Price(Decimal(0), Decimal(0)))\n",
        "a model with no price is called and recorded as free",
        "tests/core/test_model_calls.py::"
        "test_a_model_with_no_price_is_refused_and_nothing_is_recorded_or_charged",
    ),
    Mutation(
        "an attempt with no answer is charged nothing",
        "G-MODEL-3",
        "core/model_record.py",
        """        " FROM model_calls WHERE run_id = ? AND status != 'refused'",\n""",
        """        " FROM model_calls WHERE run_id = ? AND status = 'answered'",\n""",
        "a lost answer, or one cut off by a crash, costs the run nothing against its limits",
        "tests/core/test_model_calls.py::test_a_lost_answer_is_charged_at_its_projection",
    ),
    Mutation(
        "verify does not compare the model calls",
        "G-MODEL-3",
        "core/replay.py",
        """        model_record.compare(conn, rebuilt["model_calls"])\n""",
        "",
        "a model call's tokens or cost edited behind the chain verifies",
        "tests/core/test_model_calls.py::"
        "test_each_edit_of_the_model_calls_behind_the_chain_is_found_naming_the_row"
        "[a call's tokens]",
    ),
    # --- G-TRACE-1: no content in the spans ----------------------------------------------------
    Mutation(
        "a tool call's span carries its request",
        "G-TRACE-1",
        "core/spans.py",
        'attrs = _strings(request if isinstance(request, dict) else {}, tool="signoff.tool.name")',
        'attrs = _strings(request if isinstance(request, dict) else {}, tool="signoff.tool.name")'
        ' | {"signoff.tool.request": str(request)}',
        "the arguments (and the goal, in the policy's request) reach the collector",
        "tests/core/test_telemetry.py::"
        "test_no_span_of_a_gated_run_carries_its_content_in_any_spelling",
    ),
    Mutation(
        "the goal names the run's span",
        "G-TRACE-1",
        "core/spans.py",
        'self._start(("run",), "signoff.run", None, at, attrs)',
        'self._start(("run",), f"signoff.run {payload.get(\'goal\')}", None, at, attrs)',
        "the run's goal is sent as the name of its span",
        "tests/core/test_telemetry.py::"
        "test_no_span_of_a_gated_run_carries_its_content_in_any_spelling",
    ),
    Mutation(
        "a failed step's status says its observation",
        "G-TRACE-1",
        "core/spans.py",
        'error = status if status == "failed" else None',
        'error = str(payload.get("observation")) if status == "failed" else None',
        "a tool's error, which may repeat its arguments, is sent as the span's status",
        "tests/proxy/test_telemetry_live.py::"
        "test_no_span_of_a_proxied_call_carries_its_arguments_result_or_error",
    ),
    Mutation(
        "an invalid decision's tool is named",
        "G-TRACE-1",
        "core/spans.py",
        "            attrs = _known(decision if isinstance(decision, dict) else {})\n",
        "            attrs = _known(decision if isinstance(decision, dict) else {})\n"
        "            attrs |= _strings(decision if isinstance(decision, dict) else {},"
        ' tool="signoff.decision.tool")\n',
        "a model that wrote the arguments into a tool's name has them sent",
        "tests/core/test_telemetry.py::"
        "test_no_span_of_a_gated_run_carries_its_content_in_any_spelling",
    ),
    Mutation(
        "any origin is sent",
        "G-TRACE-1",
        "core/spans.py",
        'if decision.get("origin") in ORIGINS:',
        'if decision.get("origin"):',
        "an unknown origin, the proposer's own text, is sent",
        "tests/core/test_telemetry.py::"
        "test_no_span_of_a_gated_run_carries_its_content_in_any_spelling",
    ),
    # --- G-CRASH-1: no side effect twice without the operator ---------------------------------
    Mutation(
        "a takeover treats every started tool as repeatable",
        "G-CRASH-1",
        "core/takeover.py",
        "    if effects.repeatable(recorded_spec(gate, step)):\n",
        '    if step.status == "executing":\n',
        "a mutation that died mid-call is marked interrupted and run again with no operator",
        "tests/core/test_crash.py::test_an_in_process_crash_at_each_point_keeps_the_contract[mutating-tool_started]",
    ),
    Mutation(
        "the proxy's path calls its tool with no start recorded",
        "G-CRASH-1",
        "core/first_step.py",
        "                if state.allowed and request is not None:\n",
        "                if False:\n",
        "a proxied mutation that died mid-call left no started step, so it may run again unasked",
        "tests/core/test_first_step.py::test_a_process_that_dies_after_the_first_commit_leaves_a_started_step_the_takeover_holds",
    ),
    # --- G-CRASH-2: the lease -----------------------------------------------------------------
    Mutation(
        "the heartbeat renews once every three TTLs",
        "G-CRASH-2",
        "core/lease.py",
        "            time.sleep(self._ttl / 3)\n",
        "            time.sleep(self._ttl * 3)\n",
        "a tool call longer than the TTL loses its lease to the first process that looks",
        "tests/core/test_lease.py::test_the_heartbeat_renews_while_the_main_connection_holds_a_long_read",
    ),
    Mutation(
        "a tool's outcome is written without the lease",
        "G-CRASH-2",
        "core/execution.py",
        "    end_at = format_time(end)\n    with s._write() as tx:\n",
        "    end_at = format_time(end)\n    with s._store.transaction() as tx:\n",
        "a session that lost its lease mid-call records its tool's outcome over the new owner's",
        "tests/core/test_lease.py::test_a_tool_whose_session_lost_the_lease_finishes_but_its_outcome_is_not_recorded",
    ),
    # --- G-CHAIN-3: the state tables rebuilt from the events ---------------------------------
    Mutation(
        "verify does not compare the approvals table",
        "G-CHAIN-3",
        "core/replay.py",
        '        _compare_approvals(conn, rebuilt["approvals"])\n',
        "",
        "an approval set to approved, or its decider changed, behind the chain passes verify",
        "tests/core/test_verify_state.py::"
        "test_each_edit_of_a_state_table_is_found_by_verify_naming_the_row[secret-service]",
    ),
    Mutation(
        "verify's MAC comparison accepts a prefix",
        "G-CHAIN-3",
        "core/replay.py",
        "or not mac_matches(sent, mac(key, fields)):",
        "or not mac(key, fields).startswith(str(sent)):",
        "signoff verify passes a decision whose MAC was emptied under the real key id",
        "tests/core/test_authenticated_grants.py::"
        "test_verify_names_a_decision_whose_mac_is_forged_under_the_real_key_id"
        "[secret-service-empty]",
    ),
    # --- G-KEY-1: a grant only on an authenticated decision ----------------------------------
    Mutation(
        "the approvals row is the grant",
        "G-KEY-1",
        "core/waiting.py",
        "    granted = authenticated(s, approval)\n",
        "    granted = Granted(approval.decided_at or approval.created_at,"
        " run.limits.grant_ttl_seconds)\n",
        "an approvals row set to approved by a file write is executed",
        "tests/core/test_authenticated_grants.py::"
        "test_an_approvals_row_set_to_approved_with_no_event_executes_nothing[secret-service]",
    ),
    Mutation(
        "a decision's MAC is not compared",
        "G-KEY-1",
        "core/operator_key.py",
        'if payload.get("key") != key_id(key) or not mac_matches(sent, mac(key, fields)):',
        "if False:",
        "a forged approval.decided event with a made-up MAC is executed",
        "tests/core/test_authenticated_grants.py::test_a_forged_decision_event_executes_nothing"
        "[secret-service-0000000000000000000000000000000000000000000000000000000000000000]",
    ),
    Mutation(
        "a decision's MAC comparison accepts a prefix",
        "G-KEY-1",
        "core/operator_key.py",
        "or not mac_matches(sent, mac(key, fields)):",
        "or not mac(key, fields).startswith(sent):",
        "a decision whose MAC a database writer emptied, under the real key id, is executed",
        "tests/core/test_authenticated_grants.py::"
        "test_a_decision_whose_mac_is_forged_under_the_real_key_id_executes_nothing"
        "[secret-service-empty]",
    ),
    Mutation(
        "the MAC comparison accepts a prefix (decisions)",
        "G-KEY-1",
        "core/operator_key.py",
        '    return hmac.compare_digest(sent.encode("utf-8", "surrogatepass"),'
        " expected.encode())\n",
        "    return expected.startswith(sent)\n",
        "a decision whose MAC was cut to its first digits is executed",
        "tests/core/test_authenticated_grants.py::"
        "test_a_decision_whose_mac_is_forged_under_the_real_key_id_executes_nothing"
        "[secret-service-a prefix]",
    ),
    Mutation(
        "the MAC is compared as text",
        "G-KEY-1",
        "core/operator_key.py",
        '    return hmac.compare_digest(sent.encode("utf-8", "surrogatepass"),'
        " expected.encode())\n",
        "    return hmac.compare_digest(sent, expected)\n",
        "a MAC written in full-width digits raises TypeError where its refusal is due",
        "tests/core/test_authenticated_grants.py::"
        "test_a_decision_whose_mac_is_forged_under_the_real_key_id_executes_nothing"
        "[secret-service-in full-width digits]",
    ),
    Mutation(
        "a decision's MAC leaves out its approval",
        "G-KEY-1",
        "core/operator_key.py",
        '        "approval": approval.id,\n',
        "",
        "a real decision edited in its approval (event and tables alike) is executed",
        "tests/core/test_authenticated_grants.py::"
        "test_a_real_decision_edited_in_any_field_its_mac_covers_executes_nothing"
        "[secret-service-approval]",
    ),
    Mutation(
        "a decision's MAC leaves out its request_hash",
        "G-KEY-1",
        "core/operator_key.py",
        '        "request_hash": approval.request_hash,\n',
        "",
        "a real decision edited in its request_hash (event and tables alike) is executed",
        "tests/core/test_authenticated_grants.py::"
        "test_a_real_decision_edited_in_any_field_its_mac_covers_executes_nothing"
        "[secret-service-request_hash]",
    ),
    Mutation(
        "a decision's MAC leaves out its status",
        "G-KEY-1",
        "core/operator_key.py",
        '        "status": status,\n',
        "",
        "a real decision edited in its status (event and tables alike) is executed",
        "tests/core/test_authenticated_grants.py::"
        "test_a_real_decision_edited_in_any_field_its_mac_covers_executes_nothing"
        "[secret-service-status]",
    ),
    Mutation(
        "a decision's MAC leaves out its by",
        "G-KEY-1",
        "core/operator_key.py",
        '        "by": by,\n',
        "",
        "a real decision edited in its by (event and tables alike) is executed",
        "tests/core/test_authenticated_grants.py::"
        "test_a_real_decision_edited_in_any_field_its_mac_covers_executes_nothing"
        "[secret-service-by]",
    ),
    Mutation(
        "a decision's MAC leaves out its at",
        "G-KEY-1",
        "core/operator_key.py",
        '        "at": at,\n',
        "",
        "a real decision edited in its at (event and tables alike) is executed",
        "tests/core/test_authenticated_grants.py::"
        "test_a_real_decision_edited_in_any_field_its_mac_covers_executes_nothing"
        "[secret-service-at]",
    ),
    Mutation(
        "a decision's MAC leaves out its reason",
        "G-KEY-1",
        "core/operator_key.py",
        '        "reason": reason,\n',
        "",
        "a real decision edited in its reason (event and tables alike) is executed",
        "tests/core/test_authenticated_grants.py::"
        "test_a_real_decision_edited_in_any_field_its_mac_covers_executes_nothing"
        "[secret-service-reason]",
    ),
    Mutation(
        "the appended mode event downgrades a database whose key is in the keyring",
        "G-KEY-1",
        "core/operator_key.py",
        "        return not _no_keyring(backend)\n",
        "        return False\n",
        "a database whose key is in the keyring runs an unsigned decision",
        "tests/core/test_authenticated_grants.py::"
        "test_a_database_with_a_key_is_not_downgraded_by_an_appended_mode_event[secret-service]",
    ),
    Mutation(
        "a chained file keyring answers for the operator key",
        "G-KEY-1",
        "core/keyring_calls.py",
        "    own = _own_os_keyring()\n",
        "    own = keyring.get_keyring()\n",
        "a key planted in keyrings.alt's plaintext file beside the Secret Service signs",
        "tests/core/test_secret_service.py::test_a_key_planted_in_a_file_keyring_is_never_read",
    ),
    Mutation(
        "a file keyring installed alone is chosen",
        "G-KEY-1",
        "core/keyring_calls.py",
        "none is named: no keyring (decision 0063)\n        return NoKeyring()",
        "none is named: no keyring (decision 0063)\n        return keyring.get_keyring()",
        "with no OS keyring, a key planted in keyrings.alt's plaintext file signs",
        "tests/core/test_secret_service.py::"
        "test_with_no_os_keyring_a_file_keyring_installed_alone_is_never_read",
    ),
    Mutation(
        "an appended mode event counts where a keyring works",
        "G-KEY-1",
        "core/operator_key.py",
        "        return unsigned_mode(conn) and not self.keeps_keys()\n",
        "        return unsigned_mode(conn)\n",
        "a file writer appends operator.unauthenticated and an unsigned approval to a database no"
        " decision was signed on yet, and the call runs though the keyring works",
        "tests/core/test_authenticated_grants.py::"
        "test_a_database_with_a_key_is_not_downgraded_by_an_appended_mode_event[secret-service]",
    ),
    # --- G-KEY-2: a restored database executes nothing ----------------------------------------
    Mutation(
        "a grant runs without looking at the kept head",
        "G-KEY-2",
        "core/execution.py",
        "                holds_since(s._store, kept, since)",
        "                pass",
        "a database put back from before an approved write runs it again",
        "tests/core/test_authenticated_grants.py::"
        "test_a_database_restored_from_before_an_approved_write_does_not_run_it_again"
        "[secret-service]",
    ),
    Mutation(
        "keyring calls of several processes interleave",
        "G-KEY-2",
        "core/keyring_calls.py",
        "    return Serialised(given)\n",
        "    return given\n",
        "a read made while another process rewrites a file keyring finds no operator key (and the"
        " next decision makes a new one)",
        "tests/core/test_secret_service.py::"
        "test_reads_beside_a_writer_of_a_file_keyring_never_miss_the_operator_key",
    ),
    Mutation(
        "the Secret Service's lock follows the bus address as spelled",
        "G-KEY-2",
        "core/keyring_calls.py",
        '        return f"socket:{found.st_dev}:{found.st_ino}"\n',
        '        return f"socket:{address}"\n',
        "two processes reaching one daemon through two spellings of its bus (a link, an escape,"
        " a guid) call it at the same time",
        "tests/core/test_secret_service.py::"
        "test_one_bus_however_its_address_is_spelled_has_one_lock_and_two_buses_two",
    ),
    Mutation(
        "a Secret Service backend made from the package's is called under the user's lock",
        "G-KEY-2",
        "core/keyring_calls.py",
        "        self.per_bus = _is_secret_service(inner)",
        "        self.per_bus = False",
        "a Secret Service backend not Signoff's own waits on, and holds, the lock of every file"
        " keyring of the user instead of its daemon's",
        "tests/core/test_secret_service.py::"
        "test_a_secret_service_backend_takes_its_bus_lock_and_a_file_keyring_the_users",
    ),
    Mutation(
        "the kept head moves back",
        "G-KEY-2",
        "core/anchor.py",
        "                    if kept.seq >= head.seq:\n",
        "                    if False:\n",
        "a writer that read an older head replaces a newer one: a later restore is not seen",
        "tests/core/test_authenticated_grants.py::"
        "test_an_older_head_never_replaces_a_newer_one[secret-service]",
    ),
    Mutation(
        "the kept head is looked up by where the file lies",
        "G-KEY-2",
        "core/heads.py",
        "    kept = heads.load(database_id)\n    unrecorded = []\n",
        "    kept = None\n    unrecorded = []\n",
        "a backup put back in another folder or behind a symbolic link finds no kept head, and"
        " the host's re-call of an approved payment pays twice",
        "tests/core/test_anchor.py::"
        "test_a_backup_put_back_anywhere_meets_the_head_kept_for_its_database"
        "[secret-service-moved]",
    ),
    Mutation(
        "another database where one was anchored passes",
        "G-KEY-2",
        "core/heads.py",
        "        elif there.database_id != database_id:\n            raise unconfirmed(",
        "        elif there.database_id != database_id:\n            continue\n"
        "            raise unconfirmed(",
        "a fresh database (or another home's) put where one was anchored runs approved calls with"
        " no alarm",
        "tests/core/test_anchor.py::"
        "test_another_database_where_one_was_anchored_runs_nothing_until_the_operator_confirms"
        "[secret-service]",
    ),
    Mutation(
        "accepting a database moves its kept head back",
        "G-KEY-2",
        "core/heads.py",
        "    if heads.load(head.database_id) is None:  # never moves a kept head back\n",
        "    if True:\n",
        "accepting a database the keyring knows moves its kept head back to the copy's: a"
        " rollback is forgiven by accepting it",
        "tests/core/test_anchor.py::test_accepting_a_database_never_forgives_a_rollback",
    ),
    Mutation(
        "a grant's events are not recomputed up to the kept head",
        "G-KEY-2",
        "core/execution.py",
        "                holds_since(s._store, kept, since)\n",
        "                holds_since(s._store, kept, kept.seq + 1)\n",
        "an older copy padded with rows carrying the live hashes passes the check of the kept head,"
        " and the host's re-call of an approved payment pays twice",
        "tests/proxy/test_forged_approvals.py::"
        "test_a_backup_put_back_and_padded_with_the_live_hashes_does_not_pay_twice",
    ),
    Mutation(
        "a standing grant's events are not recomputed up to the kept head",
        "G-KEY-2",
        "core/grants.py",
        "                holds_since(store, kept, since)\n",
        "                holds_since(store, kept, kept.seq + 1)\n",
        "a revocation overwritten by a filler row keeping its hash brings the grant back",
        "tests/core/test_grants.py::"
        "test_an_end_cut_off_and_padded_back_to_the_kept_length_brings_no_grant_back",
    ),
    Mutation(
        "the place as SIGNOFF_HOME names it is not counted",
        "G-KEY-2",
        "core/heads.py",
        "        found.append(str(named / given.name))\n",
        "        pass\n",
        "a fresh home linked in where the anchored SIGNOFF_HOME was is a new place, with no alarm",
        "tests/core/test_anchor.py::"
        "test_another_database_behind_a_link_put_on_the_way_to_signoff_home_is_seen",
    ),
    Mutation(
        "the tray's accept forgives a rollback",
        "G-KEY-2",
        "core/witness.py",
        "            if kept is not None:  # accepting never forgives a rollback",
        "            if False:  #",
        "accepting an older copy of a known database from the tray re-points the place to it",
        "tests/core/test_witness.py::"
        "test_accepting_an_older_copy_of_a_known_database_from_the_tray_is_refused",
    ),
    Mutation(
        "a head another thread kept is taken on trust",
        "G-KEY-2",
        "core/anchor.py",
        "                    _holds_read_apart(path, database_id, known)\n",
        "                    pass\n",
        "a gate whose head another thread kept runs a grant on a database put back meanwhile",
        "tests/core/test_anchor.py::test_a_head_another_thread_kept_is_checked_against_the_database",
    ),
    Mutation(
        "a used grant set back in the tables runs again",
        "G-KEY-1",
        "core/operator_key.py",
        '            if kind != "approval.decided":',
        '            if kind != "approval.decided" and False:',
        "after an approved write ran, the tables edited back to 'approved, waiting' run it again",
        "tests/core/test_authenticated_grants.py::"
        "test_a_used_grant_set_back_to_waiting_in_the_tables_does_not_run_again[secret-service]",
    ),
    Mutation(
        "the grant TTL is read from the runs table",
        "G-KEY-1",
        "core/waiting.py",
        "    ttl = granted.ttl\n",
        "    ttl = run.limits.grant_ttl_seconds\n",
        "a stale grant whose TTL was removed from runs.limits by a file write still runs",
        "tests/core/test_authenticated_grants.py::"
        "test_a_grant_ttl_removed_from_the_tables_still_lapses[secret-service]",
    ),
    Mutation(
        "a keyed database is downgraded once its key is out of reach",
        "G-KEY-1",
        "core/operator_key.py",
        "    return unauthenticated_mode(conn) and keyed_at(conn) is None\n",
        "    return unauthenticated_mode(conn)\n",
        "with the keyring made unreachable, an appended mode event runs an unsigned decision",
        "tests/core/test_authenticated_grants.py::"
        "test_a_keyed_database_is_not_downgraded_with_its_keyring_out_of_reach"
        "[secret-service-no keyring at all]",
    ),
    # --- G-KEY-3: the platform's keyring, recorded; the lock refused by name -----------------
    Mutation(
        "a keyring configuration file wins over the answering OS keyring",
        "G-KEY-3",
        "core/keyring_calls.py",
        "    if own is not None:  # the configuration file is not even read (decision 0066)\n",
        "    if own is not None and configured() is None:\n",
        "a planted keyringrc.cfg chooses the backend while the Secret Service answers",
        "tests/core/test_planted_keyring.py::"
        "test_a_planted_keyring_configuration_is_not_used_and_its_module_never_imported",
    ),
    Mutation(
        "the keyring configuration's keyring-path is loaded",
        "G-KEY-3",
        "core/keyring_calls.py",
        "    named = configured()\n",
        "    keyring.core.load_config()\n    named = configured()\n",
        "a module path planted in keyringrc.cfg is imported into every Signoff process",
        "tests/core/test_planted_keyring.py::"
        "test_with_no_os_keyring_the_configuration_names_a_backend_but_never_a_module_path",
    ),
    Mutation(
        "a grant runs under a keyring other than the recorded one",
        "G-KEY-3",
        "core/operator_key.py",
        '            raise KeyringChanged(f"{where}: {changed}. Nothing runs.")\n',
        "            pass\n",
        "a process reaching the key through another keyring runs what it finds signed there",
        "tests/core/test_planted_keyring.py::"
        "test_a_keyring_other_than_the_recorded_one_runs_nothing_until_the_operator_accepts_it",
    ),
    Mutation(
        "a standing grant ignores the recorded keyring",
        "G-KEY-3",
        "core/grants.py",
        "        if changed:  # the same as for a one-time approval",
        "        if False:  #",
        "a process reaching the operator key through a planted keyring runs the identical calls a"
        " standing grant covers",
        "tests/core/test_grants.py::"
        "test_a_standing_grant_runs_nothing_through_another_keyring_than_the_recorded_one",
    ),
    Mutation(
        "a proxy on another keyring leaves the tray green",
        "G-KEY-3",
        "core/proxy/commands.py",
        "        if changed:  # its calls wait",
        "        if False:  #",
        "a proxy whose host entry names another keyring runs nothing approved, and the operator"
        " sees no word of it",
        "tests/proxy/test_keyring_reach.py::"
        "test_a_proxy_reaching_another_keyring_than_the_recorded_one_is_shown_in_the_tray",
    ),
    Mutation(
        "a folder at the keyring lock is no named refusal",
        "G-KEY-3",
        "core/keyring_calls.py",
        "    except LockRefused as e:\n",
        "    except KeyError as e:\n",
        "a folder planted at the lock stops every decision with no word of why",
        "tests/core/test_planted_keyring.py::"
        "test_a_folder_at_the_keyring_lock_path_is_named_not_waited_on",
    ),
)
