/* placeholder */
extern int dq_placeholder_redis_conf;
