/* placeholder */
extern int dq_placeholder_cmd_jobs;
