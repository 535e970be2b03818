-- Read-only PostgreSQL role for Grafana's faultline-postgres datasource.
-- Idempotent: safe to run again (e.g. as a migration or after new tables).
-- Run as the database owner (the controller's role) or a superuser, connected
-- to the faultline database. The password is set separately, outside version
-- control:  ALTER ROLE faultline_grafana PASSWORD '...';
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'faultline_grafana') THEN
    CREATE ROLE faultline_grafana LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
  END IF;
END
$$;

-- Every session of the role is read-only and cannot run away with the database.
ALTER ROLE faultline_grafana SET default_transaction_read_only = on;
ALTER ROLE faultline_grafana SET statement_timeout = '30s';

DO $$
BEGIN
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO faultline_grafana', current_database());
END
$$;
GRANT USAGE ON SCHEMA public TO faultline_grafana;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO faultline_grafana;
-- Tables created later by the role running this script (the controller's
-- migrations) are readable too.
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO faultline_grafana;
