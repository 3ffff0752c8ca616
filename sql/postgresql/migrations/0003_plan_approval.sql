-- 0003: four-eyes approval of plans. Who (a token name other than the plan's creator) approved a plan,
-- and when; the API refuses to execute plans of Api.PlanApprovalMinJobs jobs or more until approved.
ALTER TABLE plans ADD COLUMN approved_by varchar(100);
ALTER TABLE plans ADD COLUMN approved_at timestamptz;
