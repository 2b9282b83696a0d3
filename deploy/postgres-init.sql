-- Run once by the postgres image when its data directory is created (compose.yaml mounts it):
-- the role whose grants the migrations manage, and the login the service connects as.
-- The tables belong to the migrating role (POSTGRES_USER), never to the service.
CREATE ROLE evalbook_service NOLOGIN;
CREATE ROLE evalbook_app LOGIN PASSWORD 'evalbook-app' IN ROLE evalbook_service;
