/* placeholder */
extern int dq_placeholder_cli_conn;
