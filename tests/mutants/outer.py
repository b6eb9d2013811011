"""Mutations of the proxy, the configuration, the host files, the pins and the app."""

from __future__ import annotations

from tests.mutants.mutation import Mutation

OUTER: tuple[Mutation, ...] = (
    # --- the proxy ---------------------------------------------------------------------------
    Mutation(
        "the host gets only the content of a result",
        "G-PROXY-1",
        "core/proxy/server.py",
        "            call.answer, call.whole = shaped.result, shaped.whole\n",
        '            call.answer, call.whole = {"content": shaped.result.get("content")}, None\n',
        "structuredContent, isError, _meta and unknown members of a result never reach the host",
        "tests/proxy/test_faithful.py::test_a_result_reaches_the_host_as_the_server_sent_it",
    ),
    Mutation(
        "an answer the server sent but Signoff cannot read counts as a failure",
        "G-CRASH-1",
        "core/proxy/server.py",
        "                size = e.size if isinstance(e, UpstreamAnswerTooLarge) else 0\n",
        "                raise RuntimeError(str(e)) from None\n",
        "a mutating call the server answered with a line too large to read is recorded as failed,"
        " as if it had not run",
        "tests/proxy/test_may_have_run.py::test_a_call_the_server_answered_ran_however_its_answer_reads[too-large-allow]",
    ),
    Mutation(
        "the duplicate window is compared the wrong way",
        "G-PROXY-1",
        "core/proxy/server.py",
        "return age.total_seconds() < self.config.duplicate_window_seconds",
        "return age.total_seconds() > self.config.duplicate_window_seconds",
        "an identical write made again within the window is not held as a duplicate",
        "tests/proxy/test_proxy_e2e.py::test_through_the_proxy_a_write_runs_once_after_approval_and_its_repeat_waits_as_a_duplicate",
    ),
    Mutation(
        "another spelling of a fixed parameter reaches the server",
        "G-PROXY-2",
        "core/tools.py",
        "            if folded(key) in self._hidden\n",
        "            if key in self._hidden\n",
        "a call setting 'Mode' beside the 'mode' the operator fixed is passed to the server",
        "tests/proxy/test_proxy_e2e.py::test_fixed_and_denied_parameters",
    ),
    Mutation(
        "an unclassified tool is available",
        "G-PROXY-2",
        "core/proxy/pins.py",
        "    if side_effect is None:\n"
        '        return unavailable("not classified: run `signoff classify`")\n',
        "",
        "a pinned tool nobody classified is offered to the host",
        "tests/proxy/test_offered.py::test_a_pinned_tool_nobody_classified_is_not_offered_and_a_call_of_it_is_refused",
    ),
    # --- the app -----------------------------------------------------------------------------
    Mutation(
        "the history's banner keeps its first answer",
        "G-CHAIN-2",
        "app/tray.py",
        "            self.history.witness_changed()  # its banner follows what the witness says\n",
        "            pass\n",
        "a history window opened before the witness anchored says 'not anchored' until clicked",
        "tests/app/test_history.py::test_a_history_opened_before_the_witness_anchors_says_so_once_it_has",
    ),
    Mutation(
        "a witness change during a verification is dropped",
        "G-CHAIN-2",
        "app/history.py",
        "        if self._verify_again:\n            self.verify_now()\n",
        "",
        "the witness anchoring while the history verifies leaves the banner 'not anchored'",
        "tests/app/test_history.py::test_a_witness_that_anchors_during_a_verification_is_verified_again",
    ),
    Mutation(
        "the proxy offers every pinned tool",
        "G-PROXY-2",
        "core/proxy/offered.py",
        "                if not state.available:\n",
        '                if state.status != "pinned":\n',
        "a tool unavailable for another reason than its pin (unclassified, an annotation"
        " conflict, a schema refused) is offered all the same",
        "tests/proxy/test_offered.py::test_a_pinned_tool_nobody_classified_is_not_offered_and_a_call_of_it_is_refused",
    ),
    Mutation(
        "a listing read again is taken up whole",
        "G-PROXY-2",
        "core/proxy/offered.py",
        "        self.exposed, self.refused = {}, {}\n",
        "        self.refused = {}\n",
        "a tool reworded while the proxy runs stays offered under its old pin",
        "tests/proxy/test_live_tools.py::test_a_tool_reworded_at_run_time_stops_being_offered_and_the_host_is_told",
    ),
    Mutation(
        "a title or an output schema is not pinned",
        "G-PROXY-2",
        "core/proxy/pins.py",
        'text = pinned_text(*first, member("title"), member("outputSchema"))',
        "text = pinned_text(*first)",
        "a server rewords a tool's title or output schema after it was pinned, and the tool is"
        " still offered with the new text",
        "tests/proxy/test_pins.py::test_a_title_and_an_output_schema_join_the_pinned_text_as_sent",
    ),
    Mutation(
        "a tool pinned over its short text shows its output schema",
        "G-PROXY-2",
        "core/proxy/pins.py",
        "return None if self.repin_to_forward else self.tool.output_schema",
        "return self.tool.output_schema",
        "an output schema no pin covers is shown to the host",
        "tests/proxy/test_pins.py::"
        "test_a_pin_of_the_short_text_still_holds_and_shows_no_title_or_output_schema",
    ),
    Mutation(
        "changed instructions are forwarded",
        "G-PROXY-2",
        "core/proxy/instructions.py",
        "        if why:\n",
        "        if why and got.status != CHANGED:\n",
        "a server that rewords its instructions after they were pinned reaches the host's model",
        "tests/proxy/test_instructions.py::"
        "test_changed_or_never_pinned_instructions_are_withheld_and_logged",
    ),
    Mutation(
        "an allow rule decides a request with a .. segment",
        "G-RULES-1",
        "core/policy/judge.py",
        "            doubts.extend(_text_doubts({name: value}, with_keys=True,\n"
        "                                       values=name not in judged))  # fmt: skip\n",
        "            pass\n",
        "a folder written by hand as a pattern is escaped with /notes/../secrets",
        "tests/core/test_rules.py::"
        "test_an_allow_rule_written_by_hand_still_never_allows_a_dot_dot_segment",
    ),
    Mutation(
        "an allow rule reads no key for a .. segment",
        "G-RULES-1",
        "core/policy/judge.py",
        "_text_doubts({name: value}, with_keys=True,",
        "_text_doubts({name: value}, with_keys=False,",
        'a folder rule allows {"files": {"../../.ssh/authorized_keys": ...}}, unasked',
        "tests/core/test_rules.py::"
        "test_an_allow_rule_never_allows_a_dot_dot_segment_in_a_key[spelled]",
    ),
    Mutation(
        "an allow rule reads no argument's name for a .. segment",
        "G-RULES-1",
        "core/policy/judge.py",
        "_text_doubts({name: value}, with_keys=True,",
        "_text_doubts(value, with_keys=True,",
        "a tool taking its paths as argument names writes outside the folder a rule allows",
        "tests/core/test_rules.py::"
        "test_an_allow_rule_never_allows_a_dot_dot_segment_in_a_key[argument-name]",
    ),
    Mutation(
        "an allow rule judges an object's keys as spelled",
        "G-RULES-1",
        "core/policy/judge.py",
        "        names = [_meanings(k, domain, where) for k in keys]\n",
        "        names = [[k] for k in keys]\n",
        "a key through a link leading out of the folder is allowed as if it were inside it",
        "tests/core/test_rules.py::test_an_allow_rule_judges_an_objects_keys_by_what_they_mean",
    ),
    Mutation(
        "two keys meaning one file hide a value from an allow rule",
        "G-RULES-1",
        "core/policy/judge.py",
        "            if len(set(named)) < len(named):",
        "            if False:",
        "a copy to a file outside the folder hides behind a key spelled another way",
        "tests/core/test_rules.py::test_an_allow_rule_judges_an_objects_keys_by_what_they_mean",
    ),
    Mutation(
        "a URL is read only as it is spelled",
        "G-RULES-1",
        "core/policy/meaning.py",
        "            meant = uri(base, where).meanings\n",
        "            meant = ()\n",
        "a reject rule on https://evil.com/ is escaped with EVIL.com:443 or a final dot",
        "tests/core/test_rules.py::test_a_uri_rule_holds_for_every_spelling_of_the_same_uri",
    ),
    Mutation(
        "a file URL's escapes are not decoded",
        "G-RULES-1",
        "core/policy/meaning.py",
        '        local = urllib.parse.unquote(parts.path, errors="strict")\n',
        "        local = parts.path\n",
        "file:///home/me/notes/%2e%2e/private runs under an allow rule on the notes folder",
        "tests/core/test_rules.py::test_a_uri_rule_holds_for_every_spelling_of_the_same_uri",
    ),
    Mutation(
        "a URL's dot segments are not removed",
        "G-RULES-1",
        "core/policy/meaning.py",
        "        path_part = remove_dot_segments(path_part)\n",
        "        path_part = path_part\n",
        "https://docs/api/%2e%2e/admin runs under an allow rule on /api/",
        "tests/core/test_rules.py::test_a_uri_rule_holds_for_every_spelling_of_the_same_uri",
    ),
    Mutation(
        "a path's ~ is not expanded",
        "G-RULES-1",
        "core/policy/meaning.py",
        "    text = os.path.expanduser(text)\n",
        "    text = text\n",
        "~/.ssh/id_rsa reaches the server past a reject rule on /home/me/.ssh",
        "tests/core/test_rules.py::test_a_home_relative_path_is_the_file_in_the_home",
    ),
    Mutation(
        "a relative path is read against no folder",
        "G-RULES-1",
        "core/policy/meaning.py",
        "    return None if where.cwd is None else os.path.join(where.cwd, text)\n",
        "    return None\n",
        ".ssh/id_rsa from a server started in the home passes a reject rule on ~/.ssh",
        "tests/core/test_rules.py::test_a_relative_path_is_read_against_the_servers_folder_or_asked",
    ),
    Mutation(
        "a path's links are not followed",
        "G-RULES-1",
        "core/policy/meaning.py",
        "        return os.path.realpath(text)\n",
        "        return os.path.abspath(text)\n",
        "a link inside the notes folder leading to the keys is allowed as a note; /proc/self/root"
        " passes a reject rule",
        "tests/core/test_rules.py::"
        "test_a_reject_folder_rule_is_not_escaped_by_another_spelling_of_the_same_path",
    ),
    Mutation(
        "a reject rule reads a list only whole",
        "G-RULES-1",
        "core/policy/judge.py",
        "        alone = [v for found in each for v in found]\n",
        "        alone: list[Any] = []\n",
        "a reject --one-of on a recipient lets [evil, me] through",
        "tests/core/test_rules.py::test_a_reject_rule_on_recipients_matches_a_list_holding_one_and_any_spelling",
    ),
    Mutation(
        "an address keeps its case",
        "G-RULES-1",
        "core/policy/meaning.py",
        'addr.strip().lower().rstrip(".")',
        'addr.strip().rstrip(".")',
        "EVIL@X.com passes a reject rule on evil@x.com",
        "tests/core/test_rules.py::test_a_reject_rule_on_recipients_matches_a_list_holding_one_and_any_spelling",
    ),
    Mutation(
        "a rule's own values are compared as spelled",
        "G-RULES-1",
        "core/policy/judge.py",
        "    if not domains:\n        return condition\n",
        "    if True:\n        return condition\n",
        "an allow rule on a folder reached through a link allows nothing in it",
        "tests/core/test_rules.py::test_a_link_is_judged_where_it_leads",
    ),
    Mutation(
        "a request past the readings checked is decided",
        "G-RULES-1",
        "core/policy/judge.py",
        "        if total > MOST_COMBINATIONS:\n",
        "        if False:\n",
        "a request with many spellings buys its way past a reject rule",
        "tests/core/test_rules.py::test_a_request_with_more_readings_than_are_checked_is_asked_not_allowed",
    ),
    Mutation(
        "a reject rule not ruled out lets an allowed request run",
        "G-RULES-1",
        "core/policy/policy.py",
        "    if not doubts or (decision.outcome is Outcome.ALLOW and not decided.unsure):\n",
        "    if not doubts or decision.outcome is Outcome.ALLOW:\n",
        "a read whose readings were not all checked runs unasked past a reject rule",
        "tests/core/test_rules.py::test_a_link_is_judged_where_it_leads",
    ),
    Mutation(
        "a deep home's socket folder is not own",
        "G-FILES-2",
        "core/policy/own_files.py",
        "*wake.socket_folders(),",
        "",
        "an agent writes into the fallback folder of a deep home's sockets, unasked, and can"
        " listen in the app's place",
        "tests/core/test_own_files.py::"
        "test_the_folders_a_deep_homes_sockets_go_to_are_signoffs_own",
    ),
    Mutation(
        "a project file wired in the working directory is not own",
        "G-FILES-2",
        "core/hosts.py",
        "        candidates += [(cwd / name, host) for host, name in PROJECT_FILES.items()]\n",
        "        pass\n",
        "an allow rule on writes in the project lets the agent rewrite .mcp.json, and the host"
        " starts the server without Signoff next time",
        "tests/core/test_own_files.py::"
        "test_a_project_file_wired_to_signoff_is_signoffs_own_where_the_proxy_starts",
    ),
    Mutation(
        "a path's escapes are not read decoded by the own-files rule",
        "G-FILES-2",
        "core/policy/own_files.py",
        "        forms = [word] if _FILE_URL.match(word) else meaning.path_forms(word)\n",
        "        forms = [word]\n",
        "config%2Etoml is written unasked by a server that decodes it",
        "tests/core/test_own_files.py::"
        "test_a_folder_above_signoffs_named_relatively_counts_for_a_mutating_call",
    ),
    Mutation(
        "what Signoff's trust rests on is not its own files",
        "G-FILES-2",
        "core/policy/own_files.py",
        "                 *trusted_folders(), *more]  # fmt: skip",
        "                 *more]  # fmt: skip",
        "an agent rewrites keyringrc.cfg, the keyring lock or Signoff's installation unasked",
        "tests/core/test_own_files.py::"
        "test_what_trust_rests_on_is_signoffs_own_and_a_wired_host_file_counts_alone",
    ),
    Mutation(
        "a wired host file is not Signoff's own",
        "G-FILES-2",
        "core/policy/own_files.py",
        "                        or key in files\n",
        "                        or False\n",
        "an agent rewrites the host's entry for signoff proxy unasked",
        "tests/core/test_own_files.py::"
        "test_what_trust_rests_on_is_signoffs_own_and_a_wired_host_file_counts_alone",
    ),
    Mutation(
        "a folder above Signoff's named relatively is not its own files",
        "G-FILES-2",
        "core/policy/own_files.py",
        "                above = path in wholes and _names_a_folder(path)\n",
        "                above = path in wholes and os.path.isabs(path)\n",
        "an agent moves .config away from a server started in the home, unasked",
        "tests/core/test_own_files.py::test_a_folder_above_signoffs_named_relatively_counts_for_a_mutating_call",
    ),
    Mutation(
        "an expired rule still decides",
        "G-RULES-1",
        "core/policy/rules.py",
        "        return self.expires is not None and self.expires <= now\n",
        "        return False\n",
        "a rule the operator let lapse goes on allowing calls unasked",
        "tests/core/test_rules.py::test_an_expired_rule_does_nothing",
    ),
    Mutation(
        "a rule loosens a deny",
        "G-RULES-1",
        "core/policy/policy.py",
        "        if not rules or decision.outcome is Outcome.DENY:\n",
        "        if not rules:\n",
        "an allow rule runs a call on a tool the operator denied",
        "tests/core/test_rules.py::"
        "test_no_rule_loosens_a_deny_or_makes_an_allow_out_of_anything_but_an_ask",
    ),
    Mutation(
        "an allow rule on a destructive tool decides unconfirmed",
        "G-RULES-1",
        "core/policy/rules.py",
        "        allowed_here = rule.destructive or not destructive  # rule 6\n",
        "        allowed_here = True\n",
        "a deletion runs unasked under a rule made before its tool was called destructive",
        "tests/core/test_rules.py::"
        "test_an_allow_rule_on_a_destructive_tool_needs_the_confirmation_to_decide",
    ),
    Mutation(
        "a reject rule reads only the arguments as sent",
        "G-RULES-1",
        "core/policy/judge.py",
        "lambda _, v: _any_reading(v, where)",
        "lambda _, v: [v]",
        "always reject in ~/.ssh is stepped around with ~/.ssh/./id or //home/me/.ssh/id",
        "tests/core/test_rules.py::"
        "test_a_reject_folder_rule_is_not_escaped_by_another_spelling_of_the_same_path",
    ),
    Mutation(
        "a server inherits the whole environment",
        "G-PROXY-3",
        "core/proxy/upstream.py",
        "env=server_environment(self.server),",
        "env=None,",
        "every variable of the environment Signoff runs in reaches the server, named or not",
        "tests/proxy/test_manage.py::test_a_server_gets_only_path_home_tmpdir_and_the_variables_named",
    ),
    # --- G-PROMPT-1: prompts and resources, off until turned on, pinned, gated (0055) ---------
    Mutation(
        "a prompt's get is served from the host's last listing",
        "G-PROMPT-1",
        "core/proxy/resources.py",
        "        await self._list_prompts()  # asked again: a prompt changed since is not"
        " offered\n",
        "",
        "a server rewords its prompt after the host listed it, and the host gets the new words",
        "tests/proxy/test_resources_prompts.py::"
        "test_a_prompt_reworded_after_the_hosts_listing_is_refused_at_its_get_by_name",
    ),
    Mutation(
        "prompts and resources are on for every server",
        "G-PROMPT-1",
        "core/proxy/resources.py",
        "            on = server is not None and getattr(server, kind, False)\n",
        "            on = server is not None\n",
        "a server's resources are read by the host though the operator never turned them on",
        "tests/proxy/test_resources_prompts.py::"
        "test_prompts_and_resources_are_not_offered_until_the_operator_turns_them_on",
    ),
    Mutation(
        "a prompt is pinned by its name only",
        "G-PROMPT-1",
        "core/proxy/catalog.py",
        '    return Item(name, hashlib.sha256(raw).hexdigest(), raw, value), ("", "")\n',
        '    return Item(name, hashlib.sha256(name.encode()).hexdigest(), raw, value), ("", "")\n',
        "a prompt whose description the server rewords is still offered, unreviewed",
        "tests/proxy/test_catalog.py::"
        "test_a_prompt_is_pinned_over_its_bytes_as_sent_so_a_change_of_spelling_is_a_change",
    ),
    Mutation(
        "a prompt's get goes to the server ungated",
        "G-PROMPT-1",
        "core/proxy/resources.py",
        '        return await self._gated(server, "prompts/get", sent, host, cancelled)\n',
        '        return {"result": (await self._ask(server, "prompts/get", sent)).result}\n',
        "a prompt a reject rule names is got all the same, and no run records it",
        "tests/proxy/test_resources_prompts.py::test_a_reject_rule_on_a_prompts_name_refuses_its_get",
    ),
    Mutation(
        "a prompt over the result limit is passed on",
        "G-PROMPT-1",
        "core/proxy/resources.py",
        "            if not why and len(answer.raw) > limit:\n",
        "            if False:\n",
        "a prompt or a resource larger than the operator allowed reaches the host",
        "tests/proxy/test_resources_prompts.py::"
        "test_a_prompt_larger_than_the_result_limit_is_refused_whole_and_its_run_failed",
    ),
    Mutation(
        "a credential value half reference is accepted",
        "G-REMOTE-1",
        "core/proxy/remote.py",
        '        if credential_query(name) and (not found or REFERENCE.sub("", value)):\n',
        "        if credential_query(name) and not found:\n",
        "a key written beside a reference (?api_key=${keyring:a}KEY) stands in config.toml",
        "tests/proxy/test_remote.py::"
        "test_a_bad_url_or_header_is_refused_by_name_and_the_file_kept[reference-and-literal]",
    ),
    Mutation(
        "a secret read into an unnamed query value is shown in logs",
        "G-REMOTE-1",
        "core/proxy/remote.py",
        "            hidden = hidden.replace(value, HIDDEN)\n",
        "            pass\n",
        "a keyring secret in ?x=${keyring:a} is written to proxy.log by the HTTP library's line",
        "tests/proxy/test_remote.py::"
        "test_a_keyring_secret_read_into_any_query_value_is_hidden_in_log_lines",
    ),
    Mutation(
        "a remote server's credential may be written into config.toml",
        "G-REMOTE-1",
        "core/proxy/remote.py",
        "    if is_credential_header(name) and not found:\n",
        "    if False:\n",
        "a bearer token written out in a header is kept in config.toml and in the recorded"
        " configuration",
        "tests/proxy/test_remote.py::"
        "test_a_bad_url_or_header_is_refused_by_name_and_the_file_kept[literal-bearer]",
    ),
    Mutation(
        "a remote server's headers are logged",
        "G-REMOTE-1",
        "core/proxy/http_upstream.py",
        "        self._log = private_files.open_log_bytes(self.log_path)\n",
        "        self._log = private_files.open_log_bytes(self.log_path)\n"
        "        self.note(repr(self._headers).encode())\n",
        "the token a header carries is written to the server's log",
        "tests/proxy/test_remote.py::"
        "test_a_remote_server_is_pinned_over_its_bytes_gated_approved_and_recorded[events]",
    ),
    Mutation(
        "a key in a remote server's URL may be written into config.toml",
        "G-REMOTE-1",
        "core/proxy/remote.py",
        '        if credential_query(name) and (not found or REFERENCE.sub("", value)):\n',
        "        if False:\n",
        "servers add --url https://.../mcp?api_key=KEY keeps the key in config.toml and in the"
        " recorded configuration",
        "tests/proxy/test_remote.py::"
        "test_a_bad_url_or_header_is_refused_by_name_and_the_file_kept[literal-query-key]",
    ),
    Mutation(
        "the unreachable message shows the URL as sent",
        "G-REMOTE-1",
        "core/proxy/http_upstream.py",
        'f"server {name} cannot be reached at {remote.shown(self.server.url)}:"',
        'f"server {name} cannot be reached at {self._url}:"',
        "the model, the status file and the log read the key the URL carries when the server"
        " cannot be reached",
        "tests/proxy/test_remote.py::"
        "test_a_key_in_a_hosts_url_is_moved_to_the_keyring_sent_to_the_server_and_shown_nowhere",
    ),
    Mutation(
        "the proxy's log writes each request's URL as sent",
        "G-REMOTE-1",
        "core/proxy/commands.py",
        "    remote.show_urls_in_logs()  # a remote server's URL may carry a key",
        "    # a remote server's URL may carry a key",
        "the HTTP library's line for each request puts the URL's key in logs/proxy.log",
        "tests/proxy/test_remote.py::"
        "test_a_key_in_a_hosts_url_is_moved_to_the_keyring_sent_to_the_server_and_shown_nowhere",
    ),
    Mutation(
        "hosts import only names a secret the host wrote out",
        "G-REMOTE-1",
        "core/host_remote.py",
        "            moved[secret] = value\n",
        "            pass\n",
        "a header or URL key the host wrote out is left for the operator to copy by hand, and"
        " the imported server cannot start",
        "tests/core/test_host_remote.py::"
        "test_importing_writes_the_url_and_references_never_the_secret_and_is_then_known",
    ),
    Mutation(
        "the proxy lets an allow rule run a call on signoffs own files",
        "G-FILES-2",
        "core/proxy/rules.py",
        "            decision = apply_own_files(\n",
        "            _ = apply_own_files(\n",
        "a read or a write of config.toml or the database runs under an allow rule, unasked",
        "tests/proxy/test_own_files.py::test_a_read_or_write_of_signoffs_own_files_waits_under_an_allow_rule",
    ),
    Mutation(
        "moving a folder above Signoff's is not its own files",
        "G-FILES-2",
        "core/policy/own_files.py",
        "                above = path in wholes and _names_a_folder(path)\n",
        "                above = False\n",
        "an agent moves ~/.config away with Signoff's configuration in it, unasked",
        "tests/core/test_own_files.py::"
        "test_a_folder_above_signoffs_counts_for_a_mutating_call_and_lists_are_split",
    ),
    Mutation(
        "a request naming very many paths is checked to the end on the event loop",
        "G-FILES-2",
        "core/policy/own_files.py",
        "                if len(seen) >= MOST_CHECKED:\n",
        "                if False:\n",
        "a request of a million words stalls the proxy, and one past the check runs",
        "tests/core/test_own_files.py::test_a_request_naming_more_paths_than_are_checked_waits",
    ),
    Mutation(
        "a re-call finds another host's run",
        "G-PROXY-4",
        "core/proxy/recall.py",
        " WHERE call_key = ? AND host = ? ORDER BY",
        " WHERE call_key = ? AND ? IS NOT NULL ORDER BY",
        "a second host's identical call collects the first host's approved result",
        "tests/proxy/test_host_isolation.py::test_a_host_neither_sees_nor_collects_another_hosts_request[another-application]",
    ),
    Mutation(
        "signoff_status lists every host's requests",
        "G-PROXY-4",
        "core/proxy/server.py",
        "\"SELECT id FROM runs WHERE host = ? AND status = 'WAITING_FOR_APPROVAL'\"",
        "\"SELECT id FROM runs WHERE ? IS NOT NULL AND status = 'WAITING_FOR_APPROVAL'\"",
        "a host's signoff_status lists another host's pending request and its arguments",
        "tests/proxy/test_host_isolation.py::test_a_host_neither_sees_nor_collects_another_hosts_request[another-application]",
    ),
    Mutation(
        "another host's run not ended is no duplicate",
        "G-PROXY-4",
        "core/proxy/server.py",
        "        elif since is not None:\n",
        "        elif False:\n",
        "a second host's identical write runs (or asks as a first approval) while the first"
        " host's approved or running one may take effect",
        "tests/proxy/test_host_isolation.py::test_a_host_neither_sees_nor_collects_another_hosts_request[another-application]",
    ),
    # --- G-GATE-6: a grant covers the identical calls of the host it was given for ------------
    Mutation(
        "a grant is not compared with the calling host",
        "G-GATE-6",
        "core/grants.py",
        "    if grant.host != host:  # rule 8\n",
        "    if False:  # rule 8\n",
        "the grant given to one host's request runs another host's identical call unasked",
        "tests/core/test_grants.py::"
        "test_a_grant_covers_the_identical_call_of_the_host_it_was_given_for_only",
    ),
    Mutation(
        "a grant's host is not signed",
        "G-GATE-6",
        "core/grants.py",
        '        "host": grant.host,\n',
        "",
        "a file writer edits a grant's run to name another host, whose identical call then runs"
        " under it",
        "tests/core/test_grants.py::test_a_grant_edited_to_name_another_host_is_not_honoured",
    ),
    Mutation(
        "a begin is not checked again for another host's run",
        "G-PROXY-4",
        "core/proxy/server.py",
        "check=still_latest(key, latest),",
        "check=None,",
        "two hosts making the same write at once both run it, on an allow rule",
        "tests/proxy/test_host_isolation.py::test_two_hosts_making_the_same_call_at_once_run_it_once",
    ),
    Mutation(
        "the host's line is read as the SDK read it",
        "G-JSON-1",
        "core/proxy/hostline.py",
        "        value = canonical.loads(line)\n",
        '        value = __import__("json").loads(line.decode("utf-8", "replace"))\n',
        "a tools/call naming a key twice runs with its last value, invalid UTF-8 as U+FFFD and"
        " 0.10000000000000001 as 0.1, unlike what the host wrote",
        "tests/proxy/test_host_boundary.py::"
        "test_a_host_line_signoff_cannot_read_exactly_is_refused_by_name_and_nothing_runs"
        "[a key twice in the arguments]",
    ),
    # --- the configuration -------------------------------------------------------------------
    Mutation(
        "a change is written before it is validated",
        "G-CONFIG-1",
        "core/proxy/config.py",
        '        config = parse(document, _Where(self.path, ""))\n'
        "        from core.proxy import config_record  # it reads configurations with this module\n"
        "\n"
        "        config_record.save(self.path, self.read, text)\n"
        "        return config\n",
        "        from core.proxy import config_record\n"
        "\n"
        "        config_record.save(self.path, self.read, text)\n"
        '        return parse(document, _Where(self.path, ""))\n',
        "a refused change is already in config.toml when it is refused",
        "tests/proxy/test_manage.py::test_a_refused_change_leaves_the_file_as_it_was[fixed-and-denied]",
    ),
    Mutation(
        "a recorded policy change names the new policy as the one before",
        "G-CONFIG-1",
        "core/proxy/manage.py",
        '"before": old.identity(),',
        '"before": new.identity(),',
        "the chain's policy.changed event does not say which policy the change replaced",
        "tests/app/test_settings.py::test_a_policy_change_is_saved_recorded_and_rechecks_the_history",
    ),
    Mutation(
        "a configuration file that is gone brings back the default rules",
        "G-CONFIG-1",
        "core/proxy/config_record.py",
        "        if self.recorded is None:\n            return configuration.Config()",
        "        if self.recorded is None or self.file is None:\n"
        "            return configuration.Config()",
        "a running proxy whose config.toml was deleted allows what a deny refused",
        "tests/proxy/test_manage.py::test_a_rule_changed_while_a_proxy_runs_applies_to_its_next_call",
    ),
    Mutation(
        "a proxy takes up config.toml as it stands instead of the recorded configuration",
        "G-CONFIG-2",
        "core/proxy/config_record.py",
        "        return configuration.load_text(self.path, self.recorded.text)",
        "        return configuration.load(self.path)",
        "an agent's write to config.toml allows what the operator's rules make wait",
        "tests/proxy/test_config_record.py::"
        "test_a_hand_edit_is_not_taken_up_until_the_operator_accepts_it",
    ),
    Mutation(
        "a recorded configuration is taken up without checking its MAC",
        "G-CONFIG-2",
        "core/proxy/config_record.py",
        "        problem = _problem(conn, database_id, keys, seq, text, at)",
        "        problem = ''",
        "whoever can write the database records the rules they want",
        "tests/proxy/test_config_record.py::test_a_record_forged_in_the_database_is_passed_over",
    ),
    Mutation(
        "a recorded configuration's MAC comparison accepts a prefix",
        "G-CONFIG-2",
        "core/proxy/config_record.py",
        "    if not operator_key.mac_matches(sent, expected):\n",
        "    if not expected.startswith(sent):\n",
        "a configuration recorded with an empty MAC, under the real key id, is in force",
        "tests/proxy/test_config_record.py::"
        "test_a_record_whose_mac_is_forged_under_the_real_key_id_is_passed_over[empty]",
    ),
    Mutation(
        "the MAC comparison accepts a MAC cut short (configurations)",
        "G-CONFIG-2",
        "core/operator_key.py",
        '    return hmac.compare_digest(sent.encode("utf-8", "surrogatepass"),'
        " expected.encode())\n",
        "    return sent in expected\n",
        "a configuration recorded with the right MAC less its last digit is in force",
        "tests/proxy/test_config_record.py::"
        "test_a_record_whose_mac_is_forged_under_the_real_key_id_is_passed_over"
        "[all but its last digit]",
    ),
    Mutation(
        "a record's MAC leaves out its SHA-256",
        "G-CONFIG-2",
        "core/proxy/config_record.py",
        '"seq": seq, "sha256": digest, "by": by,\n',
        '"seq": seq, "by": by,\n',
        "a signed record's rules rewritten in the database (text and SHA-256) are in force",
        "tests/proxy/test_config_record.py::"
        "test_a_real_record_edited_in_any_field_its_mac_covers_is_passed_over[sha256]",
    ),
    Mutation(
        "a record's MAC leaves out who recorded it",
        "G-CONFIG-2",
        "core/proxy/config_record.py",
        '"seq": seq, "sha256": digest, "by": by,\n',
        '"seq": seq, "sha256": digest,\n',
        "a signed record rewritten to name another recorder stays in force",
        "tests/proxy/test_config_record.py::"
        "test_a_real_record_edited_in_any_field_its_mac_covers_is_passed_over[by]",
    ),
    Mutation(
        "a record's MAC leaves out when it was recorded",
        "G-CONFIG-2",
        "core/proxy/config_record.py",
        '            "at": at, "why": why}  # fmt: skip\n',
        '            "why": why}  # fmt: skip\n',
        "a signed record rewritten to another time stays in force",
        "tests/proxy/test_config_record.py::"
        "test_a_real_record_edited_in_any_field_its_mac_covers_is_passed_over[at]",
    ),
    Mutation(
        "a record's MAC leaves out why it was recorded",
        "G-CONFIG-2",
        "core/proxy/config_record.py",
        '            "at": at, "why": why}  # fmt: skip\n',
        '            "at": at}  # fmt: skip\n',
        "a signed record rewritten to say another why stays in force",
        "tests/proxy/test_config_record.py::"
        "test_a_real_record_edited_in_any_field_its_mac_covers_is_passed_over[why]",
    ),
    Mutation(
        "the recorded configuration's place is not kept in the keyring",
        "G-CONFIG-2",
        "core/proxy/config_record.py",
        "    kept = load_kept(store.database_id)\n    with store.snapshot() as conn:",
        "    kept = None\n    with store.snapshot() as conn:",
        "hiding the records in the database makes the file 'first seen', or an older one in force",
        "tests/proxy/test_config_record.py::"
        "test_records_hidden_or_copied_in_the_database_bring_back_no_older_rules[deleted]",
    ),
    Mutation(
        "a record's MAC does not cover its place in the chain",
        "G-CONFIG-2",
        "core/proxy/config_record.py",
        '"seq": seq, "sha256": digest',
        '"seq": 0, "sha256": digest',
        "an older signed record copied into a newer event is taken for the latest",
        "tests/proxy/test_config_record.py::"
        "test_a_signed_record_copied_into_a_newer_event_does_not_verify",
    ),
    # --- the host files ----------------------------------------------------------------------
    Mutation(
        "a host file changed since it was read is overwritten",
        "G-HOST-1",
        "core/host_backups.py",
        "if _read(target) != hostfile.raw:",
        "if not _read(target):",
        "a host's own save between reading its file and writing it is lost",
        "tests/app/test_settings_hosts.py::test_a_file_the_host_saved_while_the_preview_was_open_is_not_overwritten",
    ),
    # --- the pins ----------------------------------------------------------------------------
    Mutation(
        "a kept pin text is read without its hash",
        "G-PIN-1",
        "core/proxy/pinstore.py",
        "if data is not None and hashlib.sha256(data).hexdigest() != pin:",
        'if data is not None and not data.startswith(b"["):',
        "an altered kept text is diffed against as if it were what the operator pinned",
        "tests/proxy/test_pinstore.py::test_a_kept_text_changed_on_disk_raises_pin_text_altered",
    ),
    Mutation(
        "a reworded description is re-pinned in the window unacknowledged",
        "G-PIN-1",
        "app/diffview.py",
        "self.needs_acknowledgement = diff.reworded or not diff.kept",
        "self.needs_acknowledgement = not diff.kept",
        "re-pinning a tool whose description was reworded takes one click, with nothing to tick",
        "tests/app/test_settings.py::test_a_reworded_description_shows_a_diff_and_repinning_it_must_be_acknowledged",
    ),
    # --- the app -----------------------------------------------------------------------------
    Mutation(
        "the tray decides without the hash it showed",
        "G-APP-1",
        "app/tray.py",
        "expected_hash=shown_hash, operator=self.operator, scope=scope or None,",
        "expected_hash=None, operator=self.operator, scope=scope or None,",
        "a click decides whatever request now has that id, not the one whose hash was shown",
        "tests/app/test_tray.py::test_an_approve_for_a_request_changed_since_it_was_shown_is_refused_and_decides_nothing[before-a-re-read]",
    ),
    Mutation(
        "the tray decides with the hash it re-read",
        "G-APP-1",
        "app/tray.py",
        "expected_hash=shown_hash, operator=self.operator, scope=scope or None,",
        "expected_hash=pending.request_hash, operator=self.operator, scope=scope or None,",
        "a request rewritten behind its id after it was shown is approved once the app re-read it",
        "tests/app/test_tray.py::test_an_approve_for_a_request_changed_since_it_was_shown_is_refused_and_decides_nothing[after-a-re-read]",
    ),
    Mutation(
        "an interrupted side effect is approved from a notification",
        "G-APP-1",
        "app/model.py",
        'NEEDS_THE_DIALOG_KINDS = frozenset({"interrupted_side_effect", "duplicate", "own_files"})',
        'NEEDS_THE_DIALOG_KINDS = frozenset({"duplicate", "own_files"})',
        "a call that may have run is approved again with one click on a notification",
        "tests/app/test_tray.py::test_a_call_that_may_have_run_or_already_ran_is_never_approved_from_its_notification[interrupted_side_effect]",
    ),
    Mutation(
        "a duplicate is approved from a notification",
        "G-APP-1",
        "app/model.py",
        'NEEDS_THE_DIALOG_KINDS = frozenset({"interrupted_side_effect", "duplicate", "own_files"})',
        'NEEDS_THE_DIALOG_KINDS = frozenset({"interrupted_side_effect", "own_files"})',
        "a repeat of a call that ran is approved with one click on a notification",
        "tests/app/test_tray.py::test_a_call_that_may_have_run_or_already_ran_is_never_approved_from_its_notification[duplicate]",
    ),
    Mutation(
        "a request on signoffs own files is approved from a notification",
        "G-FILES-2",
        "app/model.py",
        'NEEDS_THE_DIALOG_KINDS = frozenset({"interrupted_side_effect", "duplicate", "own_files"})',
        'NEEDS_THE_DIALOG_KINDS = frozenset({"interrupted_side_effect", "duplicate"})',
        "a request that touches config.toml or the database is approved with one click on a"
        " notification",
        "tests/app/test_tray.py::test_a_request_touching_signoffs_own_files_is_never_approved_from_its_notification[read]",
    ),
    Mutation(
        "a request whose value means other than it says is approved from a notification",
        "G-RULES-1",
        "app/model.py",
        "        if self.read:  # what a value means is not what it says: read it in the dialog\n",
        "        if False:\n",
        "a path spelled through a link to ~/.ssh is approved with one click on a notification that"
        " shows only the spelling",
        "tests/app/test_tray.py::test_a_request_whose_value_means_other_than_it_says_is_never_approved_from_its_notification[resolves-elsewhere]",
    ),
    Mutation(
        "a fixed value is shown as if the model wrote it",
        "G-APP-1",
        "core/present.py",
        '    tail = f" ({SET_BY_SIGNOFF})" if argument.fixed else ""',
        '    tail = ""',
        "a value set by Signoff reads in the notification as one of the model's arguments",
        "tests/core/test_present.py::test_fixed_values_follow_the_arguments_each_marked_set_by_signoff",
    ),
    Mutation(
        "the app listens at a name in the shared temporary folder",
        "G-FILES-1",
        "app/main.py",
        '    return str(wake.socket_path().with_name("app.sock"))',
        '    return "signoff-" + paths.database_path().parent.name',
        "another account can take the name first, and a planted file there is trusted",
        "tests/app/test_instance_and_autostart.py::"
        "test_the_instance_socket_is_the_users_own_and_a_planted_file_there_is_not_trusted",
    ),
    Mutation(
        "every server may ask the host's model",
        "G-ASK-1",
        "core/proxy/asks.py",
        "        why = self._refusal(upstream)\n",
        '        why = ""\n',
        "a server the operator never allowed to sample reaches the host's model",
        "tests/proxy/test_elicitation_sampling.py::"
        "test_sampling_is_refused_by_default_naming_why_and_the_host_never_sees_it",
    ),
    Mutation(
        "sampling is judged by the setting at start only",
        "G-ASK-1",
        "core/proxy/asks.py",
        "        if not still:\n",
        "        if False:\n",
        "sampling turned off while a proxy runs still reaches the host's model until a restart",
        "tests/proxy/test_elicitation_sampling.py::"
        "test_sampling_turned_off_while_the_proxy_runs_is_refused_from_the_next_request",
    ),
    Mutation(
        "sampling is judged by the configuration the session started with",
        "G-ASK-1",
        "core/proxy/asks.py",
        "        if self.config_path is not None:\n"
        "            config = config_record.state(self.store, self.config_path).config()\n",
        "        if False:\n"
        "            config = config_record.state(self.store, self.config_path).config()\n",
        "the setting is read from the host session's first configuration, never from the one in"
        " force, so turning it off reaches no running proxy",
        "tests/proxy/test_elicitation_sampling.py::"
        "test_sampling_turned_off_while_the_proxy_runs_is_refused_from_the_next_request",
    ),
    Mutation(
        "a subscription reaches the server unchecked",
        "G-RULES-1",
        "core/proxy/resources.py",
        'if method == "resources/subscribe":  # checked as the reads it leads to',
        "if False:  # ungated, unlike the reads it leads to",
        "a subscription to a URI whose read a reject rule refuses reaches the server",
        "tests/proxy/test_completion_subscribe_gated.py::"
        "test_a_subscription_and_a_completion_toward_a_rejected_uri_are_refused_and_never_sent",
    ),
    # --- a proxy that cannot reach the keyring (decision 0069) -------------------------------
    Mutation(
        "a left bus address with escapes is checked as written",
        "G-KEY-4",
        "core/session_bus.py",
        '    if "%" in str(socket):',
        "    if False:",
        "the socket checked is not the one D-Bus connects to (it decodes %XX)",
        "tests/proxy/test_keyring_reach.py::test_a_left_bus_address_with_escapes_is_not_used",
    ),
    Mutation(
        "a proxy started without the session bus never reads the one the app left",
        "G-KEY-4",
        "core/keyring_calls.py",
        "        address = session_bus.left()\n",
        "        address = None\n",
        "a proxy a host started with a stripped environment refuses every call, the key there",
        "tests/proxy/test_keyring_reach.py::"
        "test_a_proxy_without_the_session_bus_finds_the_one_the_app_left_and_an_approved_call_runs",
    ),
    Mutation(
        "a left bus address naming another user's socket is used",
        "G-KEY-4",
        "core/session_bus.py",
        "    address = text.strip()\n    socket_of(address)\n",
        "    address = text.strip()\n",
        "a file steers the proxy to a bus another user listens on",
        "tests/proxy/test_keyring_reach.py::"
        "test_a_session_bus_file_the_app_did_not_leave_is_not_used[another user's socket]",
    ),
    Mutation(
        "a bus file open to others is used",
        "G-KEY-4",
        "core/session_bus.py",
        "        if private_files.CHECKED and stat.S_IMODE(st.st_mode) & 0o077:\n",
        "        if False:\n",
        "a session bus file anybody could have written names the proxy's bus",
        "tests/proxy/test_keyring_reach.py::"
        "test_a_session_bus_file_the_app_did_not_leave_is_not_used[open to others]",
    ),
    Mutation(
        "a keyring out of reach is reported as holding no key",
        "G-KEY-4",
        "core/operator_key.py",
        '        why = "" if self._backend is not None else keyring_calls.unreachable(backend)\n',
        '        why = ""\n',
        "the proxy says the keyring holds no operator key when it could not reach it",
        "tests/proxy/test_keyring_reach.py::"
        "test_a_proxy_that_cannot_reach_the_keyring_names_why_and_the_tray_shows_it_and_its_host",
    ),
    Mutation(
        "the tray never reads the proxies that cannot reach the keyring",
        "G-KEY-4",
        "app/tray.py",
        "        now = keyring_reach.read(self.data_dir)\n",
        "        now: tuple[keyring_reach.Unreachable, ...] = ()\n",
        "the tray stays green while a proxy refuses every call",
        "tests/proxy/test_keyring_reach.py::"
        "test_a_proxy_that_cannot_reach_the_keyring_names_why_and_the_tray_shows_it_and_its_host",
    ),
)
