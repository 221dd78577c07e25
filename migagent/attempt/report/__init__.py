"""What the agent tells the cluster about its node (status, node_report), and reads back of it
(fleet_rows for `migagent status`, reasons for the README's table)."""
