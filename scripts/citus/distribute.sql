-- SynaptoMind's schema laid out on Citus, run on the coordinator after `synaptomind migrate` built it:
--   psql "$URL" -v ON_ERROR_STOP=1 -f scripts/citus/distribute.sql
-- Project data is distributed by project_id, colocated (a scoped call touches one shard group); users, tokens,
-- projects, memberships and the other small tables are reference tables (a copy on every node). What Citus cannot
-- hold as the single-node schema does is changed here and listed in docs/DEPLOY.md ("Citus"):
--   * every primary key and unique index of a distributed table must contain project_id: thought's key becomes
--     (project_id, id) (ids stay UUIDv7, unique by construction), the unordered-pair index of edge becomes
--     per project, primer's and thought_hit's keys gain project_id;
--   * a foreign key between distributed tables must contain project_id on both sides: the edge's source, the
--     proposal's source, links, hits and primers reference thought(project_id, id); an edge's or a proposal's
--     *target* may be in another project, so that reference has no foreign key (its cascade is lost);
--   * triggers on distributed tables need citus.enable_unsafe_triggers (set by cluster.sh).
--   * `project_open_to_everyone` (a trigger on project writing project_member) is dropped: a trigger on a shard
--     cannot write a reference table. ProjectRepository writes the everyone row in the project's transaction.
--     So is `thought_followers_move` (0026): the project of a distributed row never changes on Citus.
BEGIN;
SET LOCAL citus.enable_unsafe_triggers TO on;
DROP TRIGGER IF EXISTS project_open_to_everyone ON project;
-- Moves a thought's rows with it (0026): Citus never lets an UPDATE change a row's project, so nothing moves.
DROP TRIGGER IF EXISTS thought_followers_move ON thought;
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';

-- Foreign keys into thought(id) go first; they come back as composite ones below.
ALTER TABLE edge DROP CONSTRAINT fk_edge_source_id_thought, DROP CONSTRAINT fk_edge_target_id_thought;
ALTER TABLE placement_proposal DROP CONSTRAINT fk_placement_proposal_source_id_thought,
  DROP CONSTRAINT fk_placement_proposal_target_id_thought;
ALTER TABLE primer DROP CONSTRAINT fk_primer_thought_id_thought, DROP CONSTRAINT uq_primer_thought_id;
ALTER TABLE thought_hit DROP CONSTRAINT fk_thought_hit_thought_id_thought, DROP CONSTRAINT pk_thought_hit;
ALTER TABLE thought_url_link DROP CONSTRAINT fk_thought_url_link_thought_id_thought;

ALTER TABLE thought DROP CONSTRAINT pk_thought, ADD CONSTRAINT pk_thought PRIMARY KEY (project_id, id);
ALTER TABLE edge DROP CONSTRAINT pk_edge, ADD CONSTRAINT pk_edge PRIMARY KEY (project_id, id);
DROP INDEX uq_edge_unordered_pair;
CREATE UNIQUE INDEX uq_edge_unordered_pair ON edge (project_id, LEAST(source_id, target_id), GREATEST(source_id, target_id));
ALTER TABLE placement_proposal DROP CONSTRAINT pk_placement_proposal,
  ADD CONSTRAINT pk_placement_proposal PRIMARY KEY (project_id, id);
DROP INDEX uq_placement_proposal_pending;
CREATE UNIQUE INDEX uq_placement_proposal_pending ON placement_proposal (project_id, source_id, kind, target_id, edge_type)
  NULLS NOT DISTINCT WHERE status = 'pending';
ALTER TABLE primer DROP CONSTRAINT pk_primer, ADD CONSTRAINT pk_primer PRIMARY KEY (project_id, id),
  ADD CONSTRAINT uq_primer_thought_id UNIQUE (project_id, thought_id);
ALTER TABLE thought_hit ADD CONSTRAINT pk_thought_hit PRIMARY KEY (project_id, thought_id);
ALTER TABLE thought_url_link DROP CONSTRAINT pk_thought_url_link,
  ADD CONSTRAINT pk_thought_url_link PRIMARY KEY (project_id, id);

SELECT create_reference_table(name) FROM unnest(ARRAY[
  'app_user', 'project', 'project_member', 'api_token', 'console_session', 'preview_token', 'audit_event',
  'oauth_client', 'oauth_authorization', 'oauth_token', 'slot', 'job_run', 'health_report'
]) AS name WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = name::regclass);

SELECT create_distributed_table('thought', 'project_id');
SELECT create_distributed_table(name, 'project_id', colocate_with => 'thought') FROM unnest(ARRAY[
  'edge', 'placement_proposal', 'primer', 'thought_hit', 'thought_url_link', 'thought_content_claim',
  'lexical_corpus', 'lexical_term'
]) AS name;

ALTER TABLE edge ADD CONSTRAINT fk_edge_source_id_thought FOREIGN KEY (project_id, source_id)
  REFERENCES thought (project_id, id) ON DELETE CASCADE;
ALTER TABLE placement_proposal ADD CONSTRAINT fk_placement_proposal_source_id_thought
  FOREIGN KEY (project_id, source_id) REFERENCES thought (project_id, id) ON DELETE CASCADE;
ALTER TABLE primer ADD CONSTRAINT fk_primer_thought_id_thought FOREIGN KEY (project_id, thought_id)
  REFERENCES thought (project_id, id) ON DELETE CASCADE;
ALTER TABLE thought_hit ADD CONSTRAINT fk_thought_hit_thought_id_thought FOREIGN KEY (project_id, thought_id)
  REFERENCES thought (project_id, id) ON DELETE CASCADE;
ALTER TABLE thought_url_link ADD CONSTRAINT fk_thought_url_link_thought_id_thought
  FOREIGN KEY (project_id, thought_id) REFERENCES thought (project_id, id) ON DELETE CASCADE;
COMMIT;
